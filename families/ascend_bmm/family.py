"""The Ascend family as dse registers it (entry point ``dse.families: ascend_bmm``)."""

from pathlib import Path

import search_spaces.ascend_bmm
from dse.core import Family
from evaluators.analytical.ascend_bmm import score
from search_spaces.ascend_bmm.space import AscendBmmSpace
from search_spaces.ascend_bmm.target import ascend_target_from_dict

FAMILY = Family(name="ascend_bmm", space=AscendBmmSpace, read_target=ascend_target_from_dict,
                targets=Path(search_spaces.ascend_bmm.__file__).parent / "targets", model=score)
