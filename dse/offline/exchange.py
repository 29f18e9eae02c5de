"""``dse export-configs`` and ``dse ingest``: configs out to a device machine, results back.

The exported file lists each config with its workload and the job the runner performs (a CPU
run, or the exact commands of the IRON flow); the results file returns one entry per config.
Ingesting stores each result as an evaluation of the named evaluator (its identity makes a
second ingest a no-op) and as a trial of the study.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dse.errors import UsageError, read_json
from dse.problem import build_context, build_evaluator
from dse.results import EvalResult, Status
from dse.storage import ResultStore, canonical_key
from dse.storage.store import config_key, now
from dse.study.query import best_trials, load_trials
from dse.target import load_target
from dse.workload import workload_from_dict

CONFIGS_FORMAT = "dse-configs/1"
RESULTS_FORMAT = "dse-results/1"


def _job(evaluator: Any, params: dict[str, Any], ctx: Any) -> dict[str, Any] | str:
    """The evaluator's job for the runner (its ``offline_job``), or why it cannot run."""
    if not hasattr(evaluator, "offline_job"):
        raise UsageError(f"evaluator {evaluator.name!r} does not run offline; use one of "
                         "cpu, iron, triton")
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

    def add(self, ctx: Any, params: dict[str, Any]) -> None:
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


def export_configs(storage: str | None, study: str, top: int, out: str | Path,
                   evaluator_name: str, options: dict[str, Any]) -> tuple[int, list[str]]:
    """Write the study's ``top`` best configs per workload; returns (written, skipped reasons)."""
    store = ResultStore(storage)
    frame = load_trials(store, study)
    best = best_trials(frame, top)
    with store.session() as s:
        spec = store.require_study(s, study).spec
    export = OfflineExport(study, spec["target"], evaluator_name, options)
    params_names = frame.attrs.get("params", [])
    for _, row in best.iterrows():
        ctx = build_context(spec["target"], row["dtype"], row["shape"], row["b_layout"])
        export.add(ctx, ctx.space.resolve({k: row[k] for k in params_names}))
    return export.write(out), export.skipped


def _result(entry: dict[str, Any], evaluator: Any) -> EvalResult:
    params = entry["params"]
    if entry["status"] == "raw":  # the device machine returned what the tools printed
        return evaluator.offline_result(entry)
    return EvalResult(Status(entry["status"]), params, entry.get("metrics", {}),
                      entry.get("reason"), entry.get("elapsed_s", 0.0))


def ingest(storage: str | None, path: str | Path) -> dict[str, int]:
    """Store a results file; returns how many evaluations and trials were new."""
    data = read_json(path, "results file")
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise UsageError(f"{path}: not a dse results file (format {RESULTS_FORMAT!r}, written by "
                         "the offline runner)")
    store = ResultStore(storage)
    with store.session() as s:
        study = store.require_study(s, data["study"])
        target = load_target(study.spec["target"])
    spec_ev = data["evaluator"]
    evaluator = build_evaluator(spec_ev["name"], spec_ev.get("options") or {})
    added = {"evaluations": 0, "trials": 0, "results": len(data["results"])}
    host = data.get("provenance", {}).get("host", "offline")
    with store.session() as s:
        target_id = store.target_id(s, target.digest(), target.name, target.to_dict())
        for entry in data["results"]:
            w = workload_from_dict(entry["workload"])
            ctx = build_context(study.spec["target"], w.dtype.name, w.shape, w.b_layout)
            result = _result(entry, evaluator)
            if result.ok and "tops" not in result.metrics and "latency_s" in result.metrics:
                result.metrics["tops"] = 2.0 * ctx.workload.macs / result.metrics["latency_s"] \
                    / 1e12
            workload_id = store.workload_id(s, {**ctx.workload.to_dict(),
                                                "space": ctx.space.name})
            (config_id,) = store.config_ids(s, ctx.space.name, [result.params])
            before = store.find_evaluations(s, target_id, workload_id, [config_id],
                                            evaluator.name, evaluator.version)
            store.put_evaluations(s, [{
                "target_id": target_id, "workload_id": workload_id, "config_id": config_id,
                "evaluator": evaluator.name, "version": evaluator.version,
                "fidelity": evaluator.fidelity, "status": result.status.value,
                "reason": result.reason, "metrics": {**result.metrics,
                                                     **data.get("provenance", {})},
                "tops": result.metrics.get("tops"), "elapsed_s": result.elapsed_s,
                "host": host, "versions": data.get("provenance", {}), "created_at": now()}])
            added["evaluations"] += not before
            key = config_key(ctx.space.name, result.params)
            if key in store.trialled_keys(s, study.id, workload_id, evaluator.name):
                continue
            stored = store.find_evaluations(s, target_id, workload_id, [config_id],
                                            evaluator.name, evaluator.version)[config_id]
            store.add_trials(s, [{
                "study_id": study.id, "number": store.next_trial_number(s, study.id),
                "workload_id": workload_id, "config_id": config_id,
                "evaluation_id": stored.id, "status": stored.status, "cached": 0,
                "created_at": now()}])
            added["trials"] += 1
    return added
