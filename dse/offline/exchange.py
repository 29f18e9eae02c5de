"""``dse export-configs`` and ``dse ingest``: configs out to a device machine, results back.

The exported file lists each config with its workload and the job the runner performs (a CPU
run, or the exact commands of the IRON flow); the results file returns one entry per config.
:mod:`dse.offline.ingest` reads the results back.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from dse.core.errors import UsageError
from dse.core.evaluator import EvalContext, Evaluator, require_fits
from dse.core.registry import (
    build_context,
    build_evaluator,
    evaluator_class,
    evaluator_names,
    offline_evaluators,
    workload_from_dict,
)
from dse.storage.frames import best_trials
from dse.storage.keys import canonical_key, config_key
from dse.storage.store import ResultStore

CONFIGS_FORMAT = "dse-configs/1"
RESULTS_FORMAT = "dse-results/1"


def _job(evaluator: Evaluator, params: dict[str, Any],
         ctx: EvalContext) -> dict[str, Any] | str:
    """The evaluator's job for the runner (its ``offline_job``), or why it cannot run."""
    if not evaluator.capabilities.offline:
        offline = [n for n in evaluator_names() if evaluator_class(n).capabilities.offline]
        raise UsageError(f"evaluator {evaluator.name!r} does not run offline; use one of "
                         f"{', '.join(offline)}")
    return evaluator.offline_job(params, ctx)


class OfflineExport:
    """Configs of one study for one evaluator, collected for the offline runner and written as
    one configs file (``dse export-configs``, and ``dse run --offline`` for a ladder rung that
    cannot run on this machine)."""

    def __init__(self, study: str, target: str, evaluator_name: str,
                 options: dict[str, Any]) -> None:
        self.study, self.target, self.options = study, target, options
        self.evaluator = build_evaluator(evaluator_name, options)
        self.configs: list[dict[str, Any]] = []
        self.skipped: list[str] = []

    def add(self, ctx: EvalContext, params: dict[str, Any]) -> None:
        """Add one config of ``ctx``'s workload (or note why the runner cannot measure it)."""
        job = _job(self.evaluator, params, ctx)
        if isinstance(job, str):
            self.skipped.append(job)
            return
        workload = ctx.workload.to_dict()
        self.configs.append({"id": canonical_key({"workload": workload,
                                                  "config": config_key(ctx.space.name, params)}),
                             "workload": workload, "params": params, "job": job})

    def write(self, out: str | Path) -> int:
        """Write the configs file; returns how many configs it holds."""
        ev = self.evaluator
        Path(out).write_text(json.dumps({
            "format": CONFIGS_FORMAT, "study": self.study, "target": self.target,
            "evaluator": {"name": ev.name, "version": ev.version, "fidelity": ev.fidelity,
                          "options": self.options},
            "configs": self.configs}, indent=1))
        return len(self.configs)


def offline_evaluator_for(space: str, target: str, name: str | None) -> str:
    """``name``, or the first evaluator that measures ``space``'s configs offline when it is
    None; a name that does not fit is refused with those that do."""
    fitting = offline_evaluators(space)
    if name is None:
        if not fitting:
            raise UsageError(f"no evaluator measures {space} configs (target {target}) "
                             "offline")
        return fitting[0]
    if name in evaluator_names() and name not in fitting:
        cls = evaluator_class(name)
        what = (f"measures {', '.join(cls.spaces)} configs, not {space} ones"
                if space not in cls.spaces else "does not measure offline")
        suggestion = (f"for this study use --evaluator {' or '.join(fitting)}" if fitting
                      else f"no evaluator measures {space} configs offline")
        raise UsageError(f"--evaluator {name}: {what} (target {target}); {suggestion}")
    return name


def _option_flag(evaluator_name: str, problem: str) -> str:
    """How ``dse export-configs`` gives the option that ``problem`` names: ``--option``."""
    accepted = [p for p in inspect.signature(evaluator_class(evaluator_name)).parameters
                if p != "self"]
    named = [p for p in accepted if p in problem] or ["KEY"]
    return f" (dse export-configs takes it as --option {named[0]}=VALUE)"


def export_configs(store: ResultStore, study: str, top: int, out: str | Path,
                   evaluator_name: str | None,
                   options: dict[str, Any]) -> tuple[int, list[str], str]:
    """Write the study's ``top`` best configs per workload with ``evaluator_name`` (None: the
    one that fits the study's space); returns (written, skipped reasons, the evaluator)."""
    frame = store.load_trials(study)
    best = best_trials(frame, top)
    spec = store.study_spec(study)
    first = workload_from_dict(spec["workloads"][0])  # refuse a misfit even with no trial yet
    ctx = build_context(spec["target"], first.dtype.name, first.shape, first.b_layout)
    evaluator_name = offline_evaluator_for(ctx.space.name, ctx.target.name, evaluator_name)
    try:
        export = OfflineExport(study, spec["target"], evaluator_name, options)
    except UsageError as exc:  # a missing or bad option: say which flag gives it
        raise UsageError(f"{exc}{_option_flag(evaluator_name, str(exc))}") from None
    require_fits(export.evaluator, ctx)
    params_names = frame.attrs.get("params", [])
    for _, row in best.iterrows():
        ctx = build_context(spec["target"], row["dtype"], row["shape"], row["b_layout"])
        export.add(ctx, ctx.space.resolve({k: row[k] for k in params_names}))
    return export.write(out), export.skipped, evaluator_name
