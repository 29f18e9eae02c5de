"""The CPU family as dse registers it (entry point ``dse.families: cpu_gemm``)."""

from pathlib import Path

import search_spaces.cpu_gemm
from dse.core import Family
from evaluators.analytical.cpu_gemm import score
from search_spaces.cpu_gemm.space import CpuGemmSpace
from search_spaces.cpu_gemm.target import cpu_target_from_dict

FAMILY = Family(name="cpu_gemm", space=CpuGemmSpace, read_target=cpu_target_from_dict,
                targets=Path(search_spaces.cpu_gemm.__file__).parent / "targets", model=score)
