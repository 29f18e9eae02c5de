"""A target family: what a package registers to add one (entry-point group ``dse.families``).

dse's own families (XDNA, Ascend, Triton, CPU) are declared exactly as a user's package
declares one, in ``pyproject.toml``::

    [project.entry-points."dse.families"]
    xdna_gemm = "families.xdna_gemm.family:FAMILY"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.space import SearchSpace
from dse.core.target import Target

# The analytical model of a family: (feasible configs, target, workload) -> metric arrays.
Model = Callable[[ConfigBatch, Any, Any], dict[str, np.ndarray]]
# A family's library builder: (dispatch table, output path, options) -> the files written.
LibraryBuilder = Callable[..., Sequence[Path]]


@dataclass(frozen=True)
class Family:
    """One family of targets: its search space, how its target files are read, where its
    shipped target files are, its analytical model (what the ``analytical`` evaluator runs
    for its space; None when it has none) and what builds a dispatch table's kernels into a
    library a program links (``dse dispatch build``; None when the family builds none).

    ``name`` is the space's name, which a target file's ``space`` key gives."""

    name: str
    space: type[SearchSpace]
    read_target: Callable[[Mapping[str, Any], str], Target]
    targets: Path | None = None  # a folder of <target name>.toml files
    model: Model | None = None
    build_library: LibraryBuilder | None = None

    def shipped_targets(self) -> dict[str, Path]:
        """Name -> file of the targets the family ships."""
        if self.targets is None:
            return {}
        return {path.stem: path for path in sorted(self.targets.glob("*.toml"))}
