"""The one registry: name -> implementation, read from entry points and imported lazily.

Every family, evaluator, sampler, workload kind and command group is an entry point of a group
below, dse's own included (``pyproject.toml``), so a user's package adds any of them the way dse
does. Unknown names fail loudly with the list of valid ones. Here too: reading target files
and building the typed objects a command works on (:func:`build_context`,
:func:`build_evaluator`) from user input, once, at the edge.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys
import tomllib
from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dse.core.errors import DseError, TargetFileError, UsageError, read_text
from dse.core.suggest import did_you_mean

if TYPE_CHECKING:
    from dse.core.evaluator import EvalContext, Evaluator
    from dse.core.family_record import Family
    from dse.core.page import StudyPage
    from dse.core.space import SearchSpace
    from dse.core.strategy_record import Strategy
    from dse.core.target import Target

# kind -> entry-point group
GROUPS: dict[str, str] = {
    "target family": "dse.families",
    "evaluator": "dse.evaluators",
    "sampler": "dse.samplers",
    "workload kind": "dse.workloads",
    "command group": "dse.commands",
    "strategy": "dse.strategies",
    "study page": "dse.pages",
    "fidelity": "dse.fidelities",
}


@functools.cache
def _entry_points(kind: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUPS[kind]):
        if ep.name in found and found[ep.name].value != ep.value:
            raise DseError(f"{kind} {ep.name!r} is registered twice ({found[ep.name].value} and "
                           f"{ep.value}): uninstall one of the packages")
        found[ep.name] = ep
    return found


# registered in this process (register), and what was loaded, by kind and name
_registered: dict[str, dict[str, Any]] = {kind: {} for kind in GROUPS}
_loaded: dict[tuple[str, str], Any] = {}


def register(kind: str, name: str, implementation: Any) -> None:
    """Register ``implementation`` (an object, or ``"module:attribute"``) as ``name`` for
    ``kind`` in this process only, beside the entry points: a notebook's or a test's evaluator
    without a package. Processes started later (the offline runner, another ``dse``) do not see
    it; Ray workers get the evaluator object itself."""
    if kind not in GROUPS:
        raise UsageError(f"unknown kind {kind!r}; valid: {', '.join(GROUPS)}")
    _registered[kind][name] = implementation
    _loaded.pop((kind, name), None)


def unregister(kind: str, name: str) -> None:
    """Undo :func:`register`."""
    _registered[kind].pop(name, None)
    _loaded.pop((kind, name), None)


def registered(kind: str) -> list[str]:
    """The names registered for ``kind`` (a key of :data:`GROUPS`), sorted."""
    return sorted({*_entry_points(kind), *_registered[kind]})


def load(kind: str, name: str) -> Any:
    """What ``name`` is registered as for ``kind``.

    Raises:
        UsageError: no such name (the message lists the registered ones).
        DseError: the package that registers it cannot be imported.
    """
    if (kind, name) in _loaded:
        return _loaded[(kind, name)]
    points = _entry_points(kind)
    if name in _registered[kind]:
        value = _registered[kind][name]
        reference, loader = str(value), (lambda: _import(value) if isinstance(value, str)
                                         else value)
    elif name in points:
        reference, loader = points[name].value, points[name].load
    else:
        valid = ", ".join(registered(kind)) or ("none: is dse installed (pip install -e .)? "
                                                "its own are registered by its package metadata")
        raise UsageError(f"unknown {kind} {name!r}{did_you_mean(name, registered(kind))}; "
                         f"valid: {valid}")
    try:
        found = loader()
    except Exception as exc:  # a broken plug-in package: say which
        raise DseError(f"the {kind} {name!r} ({reference}) cannot be loaded: "
                       f"{type(exc).__name__}: {exc}") from exc
    _loaded[(kind, name)] = found
    return found


def _import(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


# -- families and what they bring --------------------------------------------------------------
def family(name: str) -> Family:
    """The target family registered as ``name`` (the name of its search space)."""
    from dse.core.family_record import Family

    return _record("target family", name, Family)


def _record(kind: str, name: str, cls: type) -> Any:
    """What ``name`` is registered as for ``kind``, which must be a ``cls`` of that name."""
    found = load(kind, name)
    if not isinstance(found, cls) or found.name != name:
        raise DseError(f"the {kind} entry point {name!r} must name a dse.core.{cls.__name__} "
                       f"called {name!r}, not {found!r}")
    return found


def families() -> dict[str, Family]:
    """Every registered target family by name; one that cannot be loaded (a broken plug-in
    package) is left out, with a warning, so the others still work."""
    out = {}
    for name in registered("target family"):
        try:
            out[name] = family(name)
        except DseError as exc:
            if name not in _warned:
                _warned.add(name)
                print(f"dse: warning: {exc}", file=sys.stderr)
    return out


_warned: set[str] = set()  # broken families already named


def strategy(name: str) -> Strategy:
    """The search strategy registered as ``name``."""
    from dse.core.strategy_record import Strategy

    return _record("strategy", name, Strategy)


def study_pages() -> dict[str, StudyPage]:
    """Every registered dashboard page by name; one that cannot be loaded (a broken plug-in
    package) is left out, with a warning, so the dashboard still serves the others."""
    from dse.core.page import StudyPage

    out = {}
    for name in registered("study page"):
        try:
            out[name] = _record("study page", name, StudyPage)
        except DseError as exc:
            if name not in _warned:
                _warned.add(name)
                print(f"dse: warning: {exc}", file=sys.stderr)
    return out


def fidelity_ranks() -> dict[str, float]:
    """Every registered fidelity's rank by name (higher: more faithful)."""
    from dse.core.fidelity import Fidelity

    return {name: float(_record("fidelity", name, Fidelity).rank)
            for name in registered("fidelity")}


def search_space_class(name: str) -> type[SearchSpace]:
    """The search space class of the family ``name``."""
    return family(name).space


def analytical_spaces() -> tuple[str, ...]:
    """The families that have an analytical model."""
    return tuple(name for name, f in families().items() if f.model is not None)


def shipped_targets() -> dict[str, Path]:
    """Name -> file of every target a family ships."""
    out: dict[str, Path] = {}
    for fam in families().values():
        for name, path in fam.shipped_targets().items():
            if name in out:
                raise DseError(f"target {name!r} is shipped twice: {out[name]} and {path}")
            out[name] = path
    return out


def available_targets() -> list[str]:
    """Names of the shipped targets."""
    return sorted(shipped_targets())


def target_path(name: str) -> Path:
    """The file of the shipped target ``name``."""
    shipped = shipped_targets()
    if name not in shipped:
        raise UsageError(f"unknown target {name!r}{did_you_mean(name, shipped)}; valid: "
                         f"{', '.join(sorted(shipped))} or the path of a target .toml file")
    return shipped[name]


def load_target(name_or_path: str | Path) -> Target:
    """Load a shipped target by name (``xdna``) or any target file by path.

    Raises:
        UsageError: the name is neither a shipped target nor an existing file.
        TargetFileError: the file is not valid TOML, names no registered family, or a key is
            missing, unknown or wrong.
    """
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.is_file()):
        path = target_path(text)
    if not path.is_file():
        raise UsageError(f"target file {text!r} does not exist")
    try:
        raw = tomllib.loads(read_text(path, "target file"))
    except tomllib.TOMLDecodeError as exc:
        raise TargetFileError(f"{path}: not valid TOML: {exc}") from exc
    space = raw.get("space")
    names = registered("target family")
    if not isinstance(space, str) or space not in names:
        shown = "missing" if space is None else repr(space)
        raise TargetFileError(f"{path}: key 'space': {shown} names no target family; valid: "
                              f"{', '.join(names)}")
    return family(space).read_target(raw, str(path))


# -- evaluators, samplers, workloads, commands ------------------------------------------------
def evaluator_class(name: str) -> type[Evaluator]:
    """The evaluator class registered as ``name``."""
    from dse.core.evaluator import Evaluator

    cls = load("evaluator", name)
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise DseError(f"the evaluator entry point {name!r} must name a subclass of "
                       f"dse.core.Evaluator, not {cls!r}")
    return cls


def evaluator_names() -> list[str]:
    """The registered evaluators' names, sorted."""
    return registered("evaluator")


def offline_evaluators(space: str) -> list[str]:
    """The evaluators that measure ``space``'s configs through the offline runner, sorted."""
    return [name for name in evaluator_names()
            if (cls := evaluator_class(name)).capabilities.offline and space in cls.spaces]


def workload_class(kind: str) -> Any:
    """The workload class of a kind (``gemm``, ``bmm``)."""
    return load("workload kind", kind)


def workload_from_dict(body: Mapping[str, Any]) -> Any:
    """A stored workload body back as its workload (extra keys such as ``space`` ignored)."""
    return workload_class(body.get("kind", "gemm")).from_dict(body)


# -- typed objects from user input ------------------------------------------------------------
def build_context(target: str, dtype: str, shape: str, b_layout: str | None = None,
                  constraints: Sequence[str] = ()) -> EvalContext:
    """Load the target, parse the workload (of the kind its search space tunes; ``b_layout``
    None for that kind's default) and build the target's search space."""
    from dse.core.evaluator import EvalContext

    tgt = load_target(target)
    space_class = search_space_class(tgt.space)
    workload = workload_class(space_class.workload_kind).parse(shape, dtype, b_layout)
    space = space_class(tgt, workload, extra_constraints=tuple(constraints))
    return EvalContext(target=tgt, workload=workload, space=space)


def build_evaluator(name: str, options: Mapping[str, Any] | None = None) -> Evaluator:
    """Instantiate the evaluator registered as ``name`` with keyword ``options``."""
    cls = evaluator_class(name)
    accepted = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(options or {}) - set(accepted))
    if unknown:
        raise UsageError(f"evaluator {name!r} has no option {unknown[0]!r}; options: "
                         f"{', '.join(accepted) or 'none'}")
    try:
        evaluator = cls(**(options or {}))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"evaluator {name!r}: {exc}") from None
    changed = _result_options(cls, options or {})
    if changed:  # results under other options are other results: not served to this one
        evaluator.version = short_version(f"{cls.version}+{changed}")
    return evaluator


VERSION_CHARS = 30  # of the 50 a stored version holds: a study's rules may add 15


def short_version(version: str) -> str:
    """``version`` itself when short enough to store, else its head and a digest."""
    if len(version) <= VERSION_CHARS:
        return version
    digest = hashlib.sha256(version.encode()).hexdigest()[:12]
    return f"{version[:VERSION_CHARS - 13]}~{digest}"


def _result_options(cls: Any, options: Mapping[str, Any]) -> str:
    """The options given that change what ``cls`` reports (its ``result_options``) and differ
    from their defaults, as ``name=value,...`` (numbers written alike: 60 and 60.0 are one)."""
    defaults = {n: p.default for n, p in inspect.signature(cls).parameters.items()}

    def text(value: Any) -> str:
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        return f"{float(value):g}" if numeric else str(value)

    return ",".join(f"{n}={text(options[n])}" for n in cls.result_options
                    if n in options and options[n] != defaults.get(n))
