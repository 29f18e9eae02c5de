"""The CPU family: a blocked GEMM on the host CPU, which every machine has (its target, block
sizes and packing, measured by the cpu evaluator)."""
