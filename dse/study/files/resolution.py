"""What a study's names resolve to, built once: its target, each workload's space and context,
and its evaluators.

Loading a study file checks its parameters against the target's space; the run then scores that
space with the study's evaluators. Both ask one :class:`Resolution`, so a target file is read,
a space built (its grid, rules and feasibility tables) and an evaluator made once per run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dse.core.evaluator import EvalContext, Evaluator
from dse.core.registry import build_evaluator, load_target, search_space_class
from dse.core.target import Target
from dse.core.workload import Workload

if TYPE_CHECKING:
    from dse.core.space import SearchSpace


class PluginSpec(Protocol):
    """A registered name and its options (``dse.study.spec.PluginSpec``)."""

    name: str
    options: dict[str, Any]


@dataclass(eq=False)
class Resolution:
    """A study's target, resolved from ``target_name``, and what it builds on demand and keeps:
    a space and context per (workload, extra rules), an evaluator per (name, options)."""

    target_name: str
    target: Target
    _contexts: dict[tuple[Workload, tuple[str, ...]], EvalContext] = field(
        default_factory=dict, repr=False)
    _evaluators: dict[str, Evaluator] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, target_name: str) -> Resolution:
        """The target named ``target_name`` (a shipped name or a TOML path).

        Raises:
            UsageError: the target does not exist or is malformed.
        """
        return cls(target_name, load_target(target_name))

    def space(self, workload: Workload, constraints: Sequence[str] = ()) -> SearchSpace:
        """``workload``'s space on the target, with the study's extra rules.

        Raises:
            UsageError: a rule does not parse or names an unknown parameter.
        """
        return self.context(workload, constraints).space

    def context(self, workload: Workload, constraints: Sequence[str] = ()) -> EvalContext:
        """``workload`` on the target, in its space (see :meth:`space`)."""
        key = (workload, tuple(constraints))
        if key not in self._contexts:
            space = search_space_class(self.target.space)(
                self.target, workload, extra_constraints=tuple(constraints))
            self._contexts[key] = EvalContext(self.target, workload, space)
        return self._contexts[key]

    def evaluator(self, plugin: PluginSpec) -> Evaluator:
        """The evaluator ``plugin`` names, with its options.

        Raises:
            UsageError: an unknown evaluator or option.
        """
        key = json.dumps([plugin.name, plugin.options], sort_keys=True, default=repr)
        if key not in self._evaluators:
            self._evaluators[key] = build_evaluator(plugin.name, plugin.options)
        return self._evaluators[key]
