"""The Triton family as dse registers it (entry point ``dse.families: triton_gemm``)."""

from pathlib import Path

import search_spaces.triton_gemm
from dse.core import Family
from evaluators.analytical.triton_gemm import score
from search_spaces.triton_gemm.space import TritonGemmSpace
from search_spaces.triton_gemm.target import gpu_target_from_dict

FAMILY = Family(name="triton_gemm", space=TritonGemmSpace, read_target=gpu_target_from_dict,
                targets=Path(search_spaces.triton_gemm.__file__).parent / "targets", model=score)
