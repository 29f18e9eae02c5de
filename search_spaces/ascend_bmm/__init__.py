"""The Ascend family: batched GEMM on Huawei Ascend NPUs (the BMM tiling design's six branches,
its rules and the pipeline model)."""
