"""The xdna_gemm family: its record (``family``) and its commands (``cli``)."""
