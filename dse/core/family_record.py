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

from dse.core.errors import UsageError
from dse.core.evaluator import EvalContext, Evaluator
from dse.core.outcome import SearchOutcome
from dse.core.params import ConfigBatch
from dse.core.space import SearchSpace
from dse.core.target import Target

# The analytical model of a family: (feasible configs, target, workload) -> metric arrays.
Model = Callable[[ConfigBatch, Any, Any], dict[str, np.ndarray]]
# A family's library builder: (dispatch table, output path, options) -> the files written.
LibraryBuilder = Callable[..., Sequence[Path]]


@dataclass(frozen=True)
class ProcedureOption:
    """An option of a family's balance procedure, as ``dse search --strategy paper`` takes it:
    its ``flag`` (``--k-mt``), the ``keyword`` it is passed to the procedure's walk as, how its
    text is read (``parse``: raise ``argparse.ArgumentTypeError`` or :class:`UsageError` with
    what is wrong), its ``help`` and ``metavar``."""

    flag: str
    keyword: str
    parse: Callable[[str], Any]
    help: str
    metavar: str = "N"


@dataclass(frozen=True)
class BalanceProcedure:
    """A family's own walk to the balance point (``dse search --strategy paper`` and the path
    ``dse balance`` shows), and the options it takes (``dse search`` builds them).

    ``walk(evaluator, ctx, fix=None, **options)`` scores configs of ``ctx.space`` with
    ``evaluator``, ``fix`` pinning parameters, and returns a :class:`SearchOutcome`: ``top``
    holds the balanced config, ``steps`` one dict per step: the step's parameters (its kernel
    keys at least) and ``step`` (its index), ``shape`` (the workload it was scored at),
    ``tops``, ``t_comp_s``, ``t_mem_s`` and ``bound``."""

    walk: Callable[..., SearchOutcome]
    options: tuple[ProcedureOption, ...] = ()

    def run(self, evaluator: Evaluator, ctx: EvalContext,
            fix: Mapping[str, Any] | None = None, **options: Any) -> SearchOutcome:
        """The walk on ``ctx``, refusing an option it does not declare."""
        known = [o.keyword for o in self.options]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise UsageError(f"the balance procedure has no option {unknown[0]!r}; options: "
                             f"{', '.join(known) or 'none'}")
        return self.walk(evaluator, ctx, fix=fix, **options)


@dataclass(frozen=True)
class Family:
    """One family of targets: its search space, how its target files are read, where its
    shipped target files are, its analytical model (what the ``analytical`` evaluator runs
    for its space; None when it has none), what builds a dispatch table's kernels into a
    library a program links (``dse dispatch build``; None when the family builds none) and
    its own walk to the balance point (None when it has none).

    ``name`` is the space's name, which a target file's ``space`` key gives."""

    name: str
    space: type[SearchSpace]
    read_target: Callable[[Mapping[str, Any], str], Target]
    targets: Path | None = None  # a folder of <target name>.toml files
    model: Model | None = None
    build_library: LibraryBuilder | None = None
    balance: BalanceProcedure | None = None

    @property
    def balance_options(self) -> tuple[ProcedureOption, ...]:
        """The options the family's balance procedure takes (none without one)."""
        return self.balance.options if self.balance is not None else ()

    def walk_to_balance(self, evaluator: Evaluator, ctx: EvalContext,
                        fix: Mapping[str, Any] | None = None, **options: Any) -> SearchOutcome:
        """The family's balance procedure on ``ctx`` (see :class:`BalanceProcedure`); a
        :class:`UsageError` for a family without one."""
        if self.balance is None:
            raise UsageError(f"the {self.name} space has no balance procedure (the paper's "
                             "procedure walks XDNA kernels)")
        return self.balance.run(evaluator, ctx, fix, **options)

    def shipped_targets(self) -> dict[str, Path]:
        """Name -> file of the targets the family ships."""
        if self.targets is None:
            return {}
        return {path.stem: path for path in sorted(self.targets.glob("*.toml"))}
