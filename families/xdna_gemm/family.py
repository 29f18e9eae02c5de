"""The XDNA family as dse registers it (entry point ``dse.families: xdna_gemm``)."""

from pathlib import Path

import search_spaces.xdna_gemm
from dse.core import Family
from evaluators.analytical.xdna_gemm import score
from search_spaces.xdna_gemm.paper_strategy import BALANCE
from search_spaces.xdna_gemm.space import XdnaGemmSpace
from search_spaces.xdna_gemm.target import xdna_target_from_dict

FAMILY = Family(name="xdna_gemm", space=XdnaGemmSpace, read_target=xdna_target_from_dict,
                targets=Path(search_spaces.xdna_gemm.__file__).parent / "targets", model=score,
                balance=BALANCE)
