"""The family as dse sees it: ``pyproject.toml`` names this object in ``dse.families``."""

from pathlib import Path

from dse.core import Family
from roofline_npu.model import score
from roofline_npu.space import RooflineSpace
from roofline_npu.target import read_target

FAMILY = Family(name="roofline_npu", space=RooflineSpace, read_target=read_target,
                targets=Path(__file__).parent / "targets", model=score)
