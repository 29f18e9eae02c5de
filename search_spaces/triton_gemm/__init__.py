"""The Triton family: GEMM kernels written in Triton on NVIDIA GPUs (tile sizes, stages, warps,
swizzle and split-K, with the rules Triton and the GPU impose)."""
