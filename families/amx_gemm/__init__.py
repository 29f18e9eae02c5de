"""The amx_gemm family: its record (``family``) and its commands (``cli``)."""
