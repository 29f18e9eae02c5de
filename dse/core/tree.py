"""The search tree a space may offer for exact search with pruning (``dse search``).

A tree splits a space level by level (say: how the array is used, then the tile's rows and
columns, then the whole tile); each node is a sub-space with an *upper bound* of the objective
over every config below it. A branch-and-bound search expands the best nodes first and drops
every node whose bound is below the k-th best config found so far: what it returns is then
exactly what scoring every config would have returned.

A tree may also leave out *dominated* choices: values of a parameter that never rank before
another value with everything else equal (a deeper buffer that only costs memory). It names
them, and :meth:`SearchTree.shadows` gives back the configs they would have made of the best
found, so the search can place them too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dse.core.params import ConfigBatch, batch_take


@dataclass(frozen=True)
class Nodes:
    """Sub-spaces of one level of a tree, one per row: the parameters that fix them (``keys``,
    arrays of batch codes) and an upper bound of the objective over each (``bound``)."""

    keys: ConfigBatch
    bound: np.ndarray

    def __len__(self) -> int:
        return len(self.bound)

    def take(self, index: np.ndarray) -> Nodes:
        """The nodes at ``index``."""
        return Nodes(batch_take(self.keys, index), self.bound[index])


class SearchTree(ABC):
    """A space split into levels for a branch-and-bound over one evaluator's objective.

    The bounds must hold for the evaluator the tree was made for (the space's own analytical
    model): a bound below a config's value makes the search miss it, which the conformance tests
    catch against brute force.
    """

    objective: str = "tops"  # maximised
    # what each level's nodes fix, for the report ("array use", "tile rows x columns", ...)
    levels: tuple[str, ...] = ()
    # parameter -> why its left-out values are dominated, for the report
    dominated: dict[str, str] = {}
    box: int = 0  # configs in the parameter box the tree covers (as chunks() counts it)

    @abstractmethod
    def roots(self) -> Nodes:
        """The nodes of the first level."""

    @abstractmethod
    def expand(self, level: int, nodes: Nodes) -> Nodes | ConfigBatch:
        """The children of ``nodes`` (of level ``level``): nodes of the next level, or, below
        the last, the configs themselves (each a full config batch, checked by the space's
        rules before it is scored)."""

    def shadows(self, batch: ConfigBatch) -> ConfigBatch:
        """Every config that differs from one of ``batch`` only in dominated choices (empty
        when the tree leaves none out)."""
        return {name: values[:0] for name, values in batch.items()}


def product(values: Mapping[str, Sequence[int]]) -> ConfigBatch:
    """Every combination of ``values`` (name -> codes), the last name varying fastest."""
    names = list(values)
    mesh = np.meshgrid(*(np.asarray(values[n], dtype=np.int64) for n in names), indexing="ij")
    return {n: m.ravel() for n, m in zip(names, mesh, strict=True)}


Bound = Callable[[ConfigBatch], np.ndarray]


def cross(keys: ConfigBatch, more: ConfigBatch) -> ConfigBatch:
    """Each row of ``keys`` with every row of ``more``."""
    rows = len(next(iter(keys.values())))
    size = len(next(iter(more.values()))) if more else 1
    return {**{n: np.repeat(v, size) for n, v in keys.items()},
            **{n: np.tile(v, rows) for n, v in more.items()}}


class ProductTree(SearchTree):
    """A space that is the product of its parameters' values, split into levels that each add
    some parameters (with a bound of the objective over every node), the parameters no level
    names enumerated below the last.

    Args:
        values: codes each parameter takes, in the space's parameter order.
        splits: per level, what it fixes (for the report), the parameters it adds and the upper
            bound of the objective over each of its nodes (given the nodes' keys).
    """

    def __init__(self, values: Mapping[str, Sequence[int]],
                 splits: Sequence[tuple[str, Sequence[str], Bound]]) -> None:
        self.values, self.splits = dict(values), list(splits)
        named = {n for _, names, _ in self.splits for n in names}
        self.rest = [n for n in values if n not in named]
        self.levels = tuple(label for label, _, _ in self.splits)
        self.box = int(np.prod([len(v) for v in values.values()]))

    def _values(self, names: Sequence[str]) -> ConfigBatch:
        return product({n: self.values[n] for n in names})

    def roots(self) -> Nodes:
        _, names, bound = self.splits[0]
        keys = self._values(names)
        return Nodes(keys, bound(keys))

    def expand(self, level: int, nodes: Nodes) -> Nodes | ConfigBatch:
        if level + 1 < len(self.splits):
            _, names, bound = self.splits[level + 1]
            keys = cross(nodes.keys, self._values(names))
            return Nodes(keys, bound(keys))
        batch = cross(nodes.keys, self._values(self.rest)) if self.rest else nodes.keys
        return {n: batch[n] for n in self.values}

