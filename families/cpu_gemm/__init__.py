"""The cpu_gemm family: its record (``family``)."""
