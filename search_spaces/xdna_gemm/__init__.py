"""The XDNA / XDNA2 family: the output-stationary whole-array GEMM on AMD Ryzen AI NPUs (its
target schema and files, search space, rules and the paper's balance procedure)."""
