"""The AMX family as dse registers it (entry point ``dse.families: amx_gemm``)."""

from pathlib import Path

import search_spaces.amx_gemm
from dse.core import Family
from evaluators.analytical.amx_gemm import score
from evaluators.hardware.amx_library import build_library
from search_spaces.amx_gemm.space import AmxGemmSpace
from search_spaces.amx_gemm.target import amx_target_from_dict

FAMILY = Family(name="amx_gemm", space=AmxGemmSpace, read_target=amx_target_from_dict,
                targets=Path(search_spaces.amx_gemm.__file__).parent / "targets", model=score,
                build_library=build_library)
