"""Study files (YAML) validated once into typed objects.

A wrong file is rejected with one message naming the file, the key, the value and what is
allowed. Everything past :func:`load_study` works on :class:`StudySpec` only.
"""

from __future__ import annotations

import stat
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dse.core import limits
from dse.core.errors import UsageError, read_text
from dse.core.fidelity import HARDWARE
from dse.core.params import IntParam
from dse.core.registry import (
    evaluator_class,
    evaluator_names,
    registered,
    search_space_class,
)
from dse.core.registry import strategy as load_strategy
from dse.core.workload import Workload
from dse.study.files.reader import MISSING as _MISSING
from dse.study.files.reader import Reader as _Reader
from dse.study.files.reader import StudyFileError
from dse.study.files.resolution import Resolution
from dse.study.files.spec_workloads import parse_workloads

# not an Optuna sampler but a strategy of its own: every feasible config of the space a trial
EXHAUSTIVE = "exhaustive"
MAXIMIZE = ("tops", "macs_per_cycle", "kernel_efficiency", "peak_tops", "dram_gbps", "balance")
MINIMIZE = ("latency_s", "t_comp_s", "t_mem_s", "t_core_s", "l1_bytes", "l2_bytes", "dram_bytes",
            "dram_bytes_a", "dram_bytes_b", "dram_bytes_c", "padding_ratio")
OBJECTIVE_METRICS = MAXIMIZE + MINIMIZE
TOP_KEYS = ("name", "target", "workload", "workloads", "space", "evaluator", "sampler",
            "objectives", "budget", "workers", "seed", "storage", "batch_size", "ladder",
            "strategy")
SELECTIONS = ("top", "spread")


@dataclass(frozen=True)
class Objective:
    """A metric to optimise and its direction."""

    metric: str
    direction: str  # "maximize" | "minimize"


@dataclass(frozen=True)
class SpaceOverrides:
    """Changes to a target's default space: pinned values, freed parameters, narrowed ranges."""

    fix: dict[str, Any] = field(default_factory=dict)
    free: tuple[str, ...] = ()
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginSpec:
    """A registered name and the keyword options its class is built with."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rung:
    """One fidelity of a ladder: its evaluator, how many configs it passes on and how they are
    chosen (``top``: the best; ``spread``: evenly over the range of its scores, best and worst
    included), and the most configs it may evaluate."""

    evaluator: PluginSpec
    keep: int | None = None
    select: str = "top"
    trials: int | None = None
    # at most ``per_group`` kept configs share the values of the ``group_by`` parameters (so a
    # shortlist is not filled with variants the cheap rung cannot tell apart)
    group_by: tuple[str, ...] = ()
    per_group: int | None = None
    # after its configs, this many more measured on a walk from the best of them through
    # configs one parameter away, the first rung's scores ordering each neighbourhood
    # (dse.study.strategies.refine)
    refine: int = 0
    # on the last rung, its best this many measured again side by side in interleaved rounds,
    # their means stored as their confirmed results (dse.study.strategies.confirm)
    confirm: int = 0


@dataclass(frozen=True)
class Budget:
    """When a study stops: trials per workload and seconds for the whole run (None: no limit)."""

    trials: int | None = None  # per workload
    time_s: float | None = None  # whole run


@dataclass(frozen=True)
class StudySpec:
    """A validated study file: target, workloads, space changes, evaluator, sampler, objectives,
    budget, ladder and run settings."""

    name: str
    target: str
    workloads: tuple[Workload, ...]
    space: SpaceOverrides
    evaluator: PluginSpec
    sampler: PluginSpec
    objectives: tuple[Objective, ...]
    budget: Budget
    workers: int = 1
    seed: int = 0
    storage: str | None = None
    batch_size: int | None = None
    ladder: tuple[Rung, ...] = ()
    source: str = ""
    # how often each workload runs (its calls per pass of the mix; () : once each), and the
    # model mix they came from, if any (see dse.study.files.spec_workloads)
    weights: tuple[float, ...] = ()
    mix: dict[str, Any] | None = None
    # how each workload's space is walked (a registered dse.core.Strategy): the file's
    # 'strategy', else what its 'ladder' or 'sampler' implies
    strategy: PluginSpec = field(default_factory=lambda: PluginSpec("asktell"))
    # the target, spaces and evaluators the file's checks built, for the run to reuse
    resolution: Resolution | None = field(default=None, compare=False, repr=False)

    def resolved(self) -> Resolution:
        """What this study's names resolve to: the one its checks built, or a new one when the
        spec was made otherwise or its target was changed since."""
        if self.resolution is not None and self.resolution.target_name == self.target:
            return self.resolution
        return Resolution.load(self.target)

    def identity(self) -> dict[str, Any]:
        """What a stored study must match to be resumed (budget, workers, storage may change)."""
        return {
            "target": self.target,
            "workloads": [w.to_dict() for w in self.workloads],
            "space": {"fix": self.space.fix, "free": list(self.space.free),
                      "ranges": {k: list(v) for k, v in self.space.ranges.items()},
                      "constraints": list(self.space.constraints)},
            "evaluator": {"name": self.evaluator.name, "options": self.evaluator.options},
            "sampler": {"name": self.sampler.name, "options": self.sampler.options},
            "objectives": [[o.metric, o.direction] for o in self.objectives],
            "seed": self.seed,
            **({"ladder": [{"evaluator": r.evaluator.name, "options": r.evaluator.options,
                            "keep": r.keep, "select": r.select, "trials": r.trials,
                            **({"group_by": list(r.group_by), "per_group": r.per_group}
                               if r.group_by else {}),
                            **({"refine": r.refine} if r.refine else {}),
                            **({"confirm": r.confirm} if r.confirm else {})}
                           for r in self.ladder]} if self.ladder else {}),
            # a study's weights and mix say what its workloads stand for (dse cover reads them)
            **({"weights": list(self.weights)} if self.weights else {}),
            **({"mix": self.mix} if self.mix else {}),
            # a strategy the file names (stored studies from before strategies had names
            # keep their identity)
            **({"strategy": {"name": self.strategy.name, "options": self.strategy.options}}
               if self.strategy != _implied_strategy(self.sampler, bool(self.ladder)) else {}),
        }

    def with_overrides(self, trials: int | None = None, workers: int | None = None) -> StudySpec:
        spec = self
        if trials is not None:
            spec = replace(spec, budget=replace(spec.budget, trials=trials))
        if workers is not None:
            spec = replace(spec, workers=workers)
        return spec




class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one,
    so a study file's earlier setting would be dropped without a word), nesting deeper than
    :data:`~dse.core.limits.YAML_DEPTH` (the composer recurses: Python's stack would
    overflow) and more than :data:`~dse.core.limits.YAML_ALIASES` aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > limits.YAML_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {limits.YAML_ALIASES} aliases (*name)",
                    self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > limits.YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"lists and mappings nested more than {limits.YAML_DEPTH} "
                    "deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def _not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a study file (missing, a folder, a device or FIFO, whose
    reads would block or never end), or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:  # a name too long, a folder on the way one may not enter
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a study file"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, FIFO or socket): give a YAML file"
    return None


def load_study(path: str | Path) -> StudySpec:
    """Read and validate a study file."""
    path = Path(path)
    problem = _not_a_regular_file(path)
    if problem:
        raise StudyFileError(f"study file {str(path)!r} {problem}")
    text = read_text(path, "study file")
    loader = None
    try:
        loader = _StrictLoader(text)  # a SafeLoader; it checks the characters at once
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > EXPANDED_NODES:
            raise StudyFileError(f"{path}: its aliases expand to more than {EXPANDED_NODES:,} "
                                 "values (an alias bomb?); write the values out")
        raw = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise StudyFileError(f"{path}: not valid YAML: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise StudyFileError(f"{path}: a value cannot be read: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return study_from_dict(raw, str(path))


EXPANDED_NODES = 100_000  # values of a study file with its aliases written out


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` holds with every alias written out (each shared node counted
    once per use, computed once)."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a node that (through an alias) holds itself counts once
        children = [] if isinstance(node, yaml.ScalarNode) else (
            [v for pair in node.value for v in pair] if isinstance(node, yaml.MappingNode)
            else node.value)
        sizes[id(node)] = min(1 + sum(_expanded_size(c, sizes) for c in children),
                              EXPANDED_NODES + 1)
    return sizes[id(node)]


def study_from_dict(raw: Any, source: str = "<study>") -> StudySpec:
    """Validate a parsed study mapping (see the README's study file reference)."""
    r = _Reader(source)
    data = r.mapping(raw, "", TOP_KEYS)
    name = r.text(data.get("name", _MISSING), "name")
    if limits.name_problem(name):
        raise r.fail("name", name, limits.name_problem(name))
    target_name = r.text(data.get("target", _MISSING), "target")
    try:
        resolution = Resolution.load(_resolve_path(target_name, source))
    except UsageError as exc:
        raise StudyFileError(f"{source}: key 'target': {exc}") from None
    target = resolution.target
    chosen = parse_workloads(r, data, target)
    workloads = chosen.workloads
    space = _space(r, data.get("space", {}), resolution, workloads[0])
    evaluator = _plugin(r, data.get("evaluator", "analytical"), "evaluator", None)
    sampler = _plugin(r, data.get("sampler", "tpe"), "sampler",
                      (*registered("sampler"), EXHAUSTIVE))
    objectives = _objectives(r, data.get("objectives", ["tops"]),
                             search_space_class(target.space).objective_metrics)
    budget_raw = r.mapping(data.get("budget", {}), "budget", ("trials", "time_s"))
    budget = Budget(
        trials=r.integer(budget_raw["trials"], "budget.trials", 1) if "trials" in budget_raw
        else None,
        time_s=r.number(budget_raw["time_s"], "budget.time_s") if "time_s" in budget_raw
        else None)
    strategy = _strategy(r, data, sampler)
    walk = load_strategy(strategy.name)
    if not walk.enumerates and budget.trials is None and budget.time_s is None:
        raise StudyFileError(f"{source}: key 'budget': give trials and/or time_s (only a "
                             "strategy that lists the whole space, as exhaustive and ladder "
                             "do, needs no budget)")
    if sampler.name == "cmaes" and len(objectives) > 1:
        raise StudyFileError(f"{source}: key 'sampler': cmaes optimises one objective; use "
                             "nsga2, tpe or random for several")
    params = tuple(resolution.space(workloads[0], space.constraints).params())
    ladder = _ladder(r, data.get("ladder"), target, params)
    if walk.takes_rungs != bool(ladder):
        raise StudyFileError(f"{source}: strategy {walk.name!r} "
                             + ("runs a 'ladder': give its rungs" if walk.takes_rungs else
                                "does not run a 'ladder': drop it or the 'strategy'"))
    if walk.uses_sampler and sampler.name == EXHAUSTIVE:
        raise StudyFileError(f"{source}: key 'sampler': strategy {walk.name!r} asks an Optuna "
                             f"sampler; 'exhaustive' is a strategy (strategy: exhaustive)")
    if "sampler" in data and not walk.uses_sampler and sampler.name != EXHAUSTIVE:
        raise StudyFileError(f"{source}: key 'sampler': strategy {walk.name!r} asks no sampler; "
                             "drop 'sampler'")
    if ladder and ("evaluator" in data or "sampler" in data):
        raise StudyFileError(f"{source}: a study with a 'ladder' takes its evaluators from the "
                             "rungs and scores the whole space: drop 'evaluator' and 'sampler'")
    if ladder:
        evaluator = ladder[-1].evaluator
    else:
        _check_evaluator_space(r, evaluator, target, "evaluator")
    if walk.enumerates and sampler.name != EXHAUSTIVE:  # its listing's options (max_configs)
        sampler = PluginSpec(EXHAUSTIVE)
    storage = data.get("storage")
    return StudySpec(
        name=name, target=_resolve_path(target_name, source), workloads=workloads, space=space,
        evaluator=evaluator, sampler=sampler, objectives=objectives, budget=budget,
        workers=r.integer(data.get("workers", 1), "workers", 1),
        seed=r.integer(data.get("seed", 0), "seed", 0),
        storage=None if storage is None else r.text(storage, "storage"),
        batch_size=None if data.get("batch_size") is None
        else r.integer(data["batch_size"], "batch_size", 1),
        ladder=ladder, source=source, weights=chosen.weights, mix=chosen.mix,
        strategy=strategy, resolution=resolution,
    )


def _implied_strategy(sampler: PluginSpec, ladder: bool) -> PluginSpec:
    """The strategy a file that names none asks for: its ladder's, or its sampler's."""
    if ladder:
        return PluginSpec("ladder")
    return PluginSpec("exhaustive" if sampler.name == EXHAUSTIVE else "asktell")


def _strategy(r: _Reader, data: Mapping[str, Any], sampler: PluginSpec) -> PluginSpec:
    if "strategy" not in data:
        return _implied_strategy(sampler, "ladder" in data)
    strategy = _plugin(r, data["strategy"], "strategy", tuple(registered("strategy")))
    allowed = load_strategy(strategy.name).options
    for option in strategy.options:
        if option not in allowed:
            raise StudyFileError(f"{r.source}: key 'strategy.options.{option}': strategy "
                                 f"{strategy.name!r} takes {', '.join(allowed) or 'no options'}")
    return strategy


def _check_evaluator_space(r: _Reader, plugin: PluginSpec, target: Any, key: str) -> None:
    spaces = evaluator_class(plugin.name).spaces
    if target.space not in spaces:
        raise StudyFileError(f"{r.source}: key '{key}': evaluator {plugin.name!r} cannot score "
                             f"target {target.name!r} (space {target.space}); it scores "
                             f"{', '.join(spaces)}")


def _ladder(r: _Reader, raw: Any, target: Any, params: tuple[str, ...]) -> tuple[Rung, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) < 2:
        raise r.fail("ladder", raw, "expected a list of at least two rungs")
    rungs = []
    for i, item in enumerate(raw):
        key = f"ladder[{i}]"
        data = r.mapping(item, key, ("evaluator", "options", "keep", "select", "budget",
                                     "group_by", "per_group", "refine", "confirm"))
        plugin = _plugin(r, {"name": data.get("evaluator", _MISSING),
                             "options": data.get("options", {})}, f"{key}.evaluator", None)
        _check_evaluator_space(r, plugin, target, f"{key}.evaluator")
        last = i == len(raw) - 1
        keep = data.get("keep")
        if keep is None and not last:
            raise r.fail(f"{key}.keep", _MISSING, "every rung but the last passes on 'keep' "
                         "configs")
        if keep is not None and last:
            raise r.fail(f"{key}.keep", keep, "no 'keep' on the last rung, which passes "
                         "nothing on (cap it with budget: {trials: N})")
        budget = r.mapping(data.get("budget", {}), f"{key}.budget", ("trials",))
        group_by = tuple(r.str_list(data.get("group_by", []), f"{key}.group_by"))
        for name in group_by:
            if name not in params:
                raise r.fail(f"{key}.group_by", name, f"a parameter ({', '.join(params)})")
        if ("per_group" in data) != bool(group_by):
            raise r.fail(f"{key}.per_group", data.get("per_group", _MISSING),
                         "give group_by and per_group together")
        refine = r.integer(data.get("refine", 0), f"{key}.refine", 0, "ladder.refine")
        if refine and i == 0:
            raise r.fail(f"{key}.refine", refine, "a walk on a later rung: the first rung's "
                         "scores order the neighbourhoods it walks through")
        if refine and not evaluator_class(rungs[0].evaluator.name).capabilities.score:
            raise r.fail(f"{key}.refine", refine, "a first rung that scores the whole space "
                         f"at once, which {rungs[0].evaluator.name!r} does not")
        confirm = _confirm(r, data, key, plugin, last)
        rungs.append(Rung(
            evaluator=plugin, keep=None if keep is None else r.integer(keep, f"{key}.keep", 1,
                                                                "ladder.keep"),
            select=r.choice(data.get("select", "top"), f"{key}.select", SELECTIONS),
            trials=r.integer(budget["trials"], f"{key}.budget.trials", 1,
                             "ladder.budget.trials")
            if "trials" in budget else None, group_by=group_by,
            per_group=r.integer(data["per_group"], f"{key}.per_group", 1, "ladder.per_group")
            if group_by else None, refine=refine, confirm=confirm))
    return tuple(rungs)


def _confirm(r: _Reader, data: dict[str, Any], key: str, plugin: PluginSpec, last: bool) -> int:
    """A rung's ``confirm``: on the last rung only, and only of an evaluator that measures
    hardware (a model or a simulator gives the same answer twice)."""
    confirm = r.integer(data.get("confirm", 0), f"{key}.confirm", 0, "ladder.confirm")
    if not confirm:
        return 0
    if not last:
        raise r.fail(f"{key}.confirm", confirm, "confirming is for the last rung, whose "
                     "best is the study's result")
    fidelity = evaluator_class(plugin.name).fidelity
    if fidelity != HARDWARE.name:
        raise r.fail(f"{key}.confirm", confirm, "confirming is for a rung that measures "
                     f"hardware ({plugin.name!r} is of fidelity {fidelity}: it answers alike "
                     "every time)")
    return confirm


def _resolve_path(target: str, source: str) -> str:
    """A target path in a study file is relative to the file."""
    if target.endswith(".toml") and not Path(target).is_absolute() and source != "<study>":
        candidate = Path(source).parent / target
        if candidate.is_file():
            return str(candidate)
    return target


def _space(r: _Reader, raw: Any, resolution: Resolution, first: Workload) -> SpaceOverrides:
    """The study's changes to its space, checked on the first workload's (built once, with the
    study's extra rules, and kept for the run)."""
    data = r.mapping(raw or {}, "space", ("fix", "free", "range", "constraints"))
    constraints = r.str_list(data.get("constraints", []), "space.constraints")
    try:
        params = resolution.space(first, constraints).params()
    except UsageError as exc:
        raise StudyFileError(f"{r.source}: key 'space.constraints': {exc}") from None

    def known(name: str, key: str) -> None:
        if name not in params:
            raise StudyFileError(f"{r.source}: key '{key}': unknown parameter {name!r}; "
                                 f"allowed: {', '.join(params)}")

    fix = {}
    for name, value in r.mapping(data.get("fix", {}), "space.fix", tuple(params)).items():
        try:
            fix[name] = params[name].parse(value)
        except UsageError as exc:
            raise StudyFileError(f"{r.source}: key 'space.fix.{name}': {exc}") from None
    free = r.str_list(data.get("free", []), "space.free")
    for name in free:
        known(name, "space.free")
        if name in fix:
            raise StudyFileError(f"{r.source}: key 'space.free': {name!r} is also fixed")
    ranges = {}
    for name, value in r.mapping(data.get("range", {}), "space.range", tuple(params)).items():
        ok = (isinstance(value, list) and len(value) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
              and value[0] <= value[1])
        integers = [n for n, p in params.items() if isinstance(p, IntParam)]
        if not ok or name not in integers:
            raise r.fail(f"space.range.{name}", value, "expected [low, high] positive integers "
                         f"for an integer parameter ({', '.join(integers)})")
        ranges[name] = (value[0], value[1])
    return SpaceOverrides(fix=fix, free=tuple(free), ranges=ranges, constraints=tuple(constraints))


def _plugin(r: _Reader, raw: Any, key: str, choices: tuple[str, ...] | None) -> PluginSpec:
    if isinstance(raw, str):
        raw = {"name": raw}
    data = r.mapping(raw, key, ("name", "options"))
    name = r.text(data.get("name", _MISSING), f"{key}.name")
    if choices is not None:
        name = r.choice(name, f"{key}.name", choices)
    else:
        name = r.choice(name, f"{key}.name", tuple(evaluator_names()))
    options = data.get("options", {}) or {}
    if not isinstance(options, Mapping):
        raise r.fail(f"{key}.options", options, "expected a mapping of option names to values")
    return PluginSpec(name, dict(options))


def _objectives(r: _Reader, raw: Any, family: Mapping[str, str]) -> tuple[Objective, ...]:
    """The objectives: dse's standard metrics, and those the family's space adds (``family``:
    metric -> its default direction)."""
    maximize = (*MAXIMIZE, *(m for m, d in family.items() if d == "maximize"))
    allowed = (*OBJECTIVE_METRICS, *(m for m in family if m not in OBJECTIVE_METRICS))
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        key = f"objectives[{i}]"
        if isinstance(item, str):
            metric = r.choice(item, key, allowed)
            direction = "maximize" if metric in maximize else "minimize"
        else:
            pair = r.mapping(item, key, allowed)
            if len(pair) != 1:
                raise r.fail(key, item, "expected one 'metric: maximize|minimize' pair")
            metric, direction = next(iter(pair.items()))
            direction = r.choice(direction, f"{key}.{metric}", ("maximize", "minimize"))
        out.append(Objective(metric, direction))
    if not out or len({o.metric for o in out}) != len(out):
        raise r.fail("objectives", raw, "expected one or more distinct metrics")
    return tuple(out)
