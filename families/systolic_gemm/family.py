"""The systolic-array family as dse registers it (entry point ``dse.families: systolic_gemm``)."""

from pathlib import Path

import search_spaces.systolic_gemm
from dse.core import Family
from evaluators.analytical.systolic_gemm import score
from search_spaces.systolic_gemm.space import SystolicGemmSpace
from search_spaces.systolic_gemm.target import systolic_target_from_dict

FAMILY = Family(name="systolic_gemm", space=SystolicGemmSpace,
                read_target=systolic_target_from_dict,
                targets=Path(search_spaces.systolic_gemm.__file__).parent / "targets", model=score)
