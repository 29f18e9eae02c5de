"""``dse ingest``: the offline runner's results file into a study.

Every record is checked before anything is stored: its workload must be one of the study's, its
parameters exactly the space's (valid values), its status known, the numbers an ok result
carries finite and positive, every value within :mod:`dse.core.limits` (see
:mod:`dse.offline.values`), its ``id`` the one its workload and parameters give. One bad record
refuses the whole file, naming the record and what is wrong, so a study never holds a result it
could not have asked for. Good files are stored in one transaction: each result as an evaluation
of the named evaluator (its identity makes a second ingest a no-op) and as a trial of the study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import DseError, UsageError, read_json
from dse.core.evaluator import EvalContext, Evaluator, require_fits
from dse.core.registry import build_context, build_evaluator, workload_from_dict
from dse.core.results import EvalResult, Status
from dse.offline.exchange import RESULTS_FORMAT
from dse.offline.values import check_provenance, check_result
from dse.storage.keys import canonical_key, config_key
from dse.storage.store import ResultStore

STATUSES = (*(s.value for s in Status), "raw")
POSITIVE_METRICS = ("tops", "latency_s")  # what ranking and calibration read


@dataclass
class _Record:
    """One checked record: its context, its config's parameters and its result."""

    ctx: EvalContext
    params: dict[str, Any]
    result: EvalResult


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UsageError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _check_metrics(result: EvalResult, where: str) -> None:
    """Ranking and calibration read ``tops`` and ``latency_s``: finite positive numbers."""
    for name in POSITIVE_METRICS:
        value = result.metrics.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value <= 0:
            raise UsageError(f"{where}: metric {name!r} must be a finite positive number, "
                             f"got {value!r}")
    if result.ok and all(result.metrics.get(name) is None for name in POSITIVE_METRICS):
        raise UsageError(f"{where}: an ok result needs metric 'latency_s' or 'tops'")


class _Checker:
    """Checks the records of one results file against its study and evaluator."""

    def __init__(self, path: str | Path, spec: Mapping[str, Any], evaluator: Any,
                 accept_interpreted: bool = False) -> None:
        self.path, self.spec, self.evaluator = path, spec, evaluator
        self.accept_interpreted = accept_interpreted
        self.workloads = {canonical_key(w): w for w in spec["workloads"]}
        self.seen: dict[str, tuple[str, Mapping[str, Any]]] = {}
        self.contexts: dict[str, Any] = {}  # one per workload: its target, space and checks

    def record(self, index: int, entry: Any) -> _Record | None:
        """The checked record at ``index`` (None for an exact repeat of an earlier one)."""
        where = f"{self.path}: results[{index}]"
        entry = _mapping(entry, where)
        missing = [k for k in ("workload", "params", "status") if k not in entry]
        if missing:
            raise UsageError(f"{where}: missing {', '.join(missing)}")
        workload = self._workload(entry["workload"], where)
        ctx = self._context(workload)
        params = self._params(ctx, entry["params"], where)
        key = canonical_key({"workload": workload.to_dict(),
                             "config": config_key(ctx.space.name, params)})
        if "id" in entry and entry["id"] != key:
            raise UsageError(f"{where}: its id {entry['id']!r} is not the one its workload and "
                             "params give (was the record edited?)")
        if key in self.seen:
            first, body = self.seen[key]
            if body != entry:
                raise UsageError(f"{where} measures the same config as {first} with other "
                                 "results; keep one of them")
            return None
        self.seen[key] = (where, entry)
        result = self._result(entry, where)
        if result.ok and result.metrics.get("tops") is None \
                and result.metrics.get("latency_s") is not None:
            result.metrics["tops"] = 2.0 * ctx.workload.macs / result.metrics["latency_s"] / 1e12
        return _Record(ctx, params, result)

    def _context(self, workload: Any) -> Any:
        key = canonical_key(workload.to_dict())
        if key not in self.contexts:
            ctx = build_context(self.spec["target"], workload.dtype.name, workload.shape,
                                workload.b_layout)
            require_fits(self.evaluator, ctx)
            self.contexts[key] = ctx
        return self.contexts[key]

    def _workload(self, body: Any, where: str) -> Any:
        try:
            workload = workload_from_dict(_mapping(body, f"{where}.workload"))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{where}.workload is not a workload: {exc!r}") from None
        if canonical_key(workload.to_dict()) not in self.workloads:
            listed = "; ".join(workload_from_dict(w).label for w in self.workloads.values())
            raise UsageError(f"{where}: workload {workload.label} is not one of the study's "
                             f"({listed})")
        return workload

    def _params(self, ctx: Any, given: Any, where: str) -> dict[str, Any]:
        given = _mapping(given, f"{where}.params")
        names = list(ctx.space.params())
        missing = [n for n in names if n not in given]
        if missing:
            raise UsageError(f"{where}: params lack {', '.join(missing)}")
        try:
            return ctx.space.parse(given)
        except DseError as exc:
            raise UsageError(f"{where}: {exc}") from None

    def _result(self, entry: Mapping[str, Any], where: str) -> EvalResult:
        status = entry["status"]
        if status not in STATUSES:
            raise UsageError(f"{where}: unknown status {status!r}; valid: {', '.join(STATUSES)}")
        if status == "raw":  # the device machine returned what the tools printed
            if not self.evaluator.capabilities.raw_output:
                raise UsageError(f"{where}: evaluator {self.evaluator.name!r} does not read raw "
                                 "tool output")
            try:
                result = self.evaluator.offline_result(entry)
            except (KeyError, TypeError, ValueError) as exc:
                raise UsageError(f"{where}: raw output unreadable: {exc!r}") from None
        else:
            metrics = dict(_mapping(entry.get("metrics", {}), f"{where}.metrics"))
            elapsed = entry.get("elapsed_s", 0.0)
            if isinstance(elapsed, bool) or not isinstance(elapsed, int | float):
                raise UsageError(f"{where}: elapsed_s must be a number, got {elapsed!r}")
            reason = entry.get("reason")
            result = EvalResult(Status(status), metrics,
                                None if reason is None else str(reason), float(elapsed))
        check_result(result, where)
        _check_metrics(result, where)
        if result.metrics.get("interpreted") is True and not self.accept_interpreted:
            raise UsageError(f"{where}: run by Triton's interpreter on the CPU "
                             f"({result.metrics.get('device', 'no GPU')}), not on the GPU: its "
                             "timings would pass for the hardware's; ingest a GPU run's results "
                             "(or pass --accept-interpreted to try the offline path)")
        return result


def _check_file(path: str | Path, data: Any) -> None:
    """Refuse anything but a results file with its study, evaluator and list of results."""
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise UsageError(f"{path}: not a dse results file (format {RESULTS_FORMAT!r}, written by "
                         "the offline runner)")
    for key, kind in (("study", str), ("evaluator", dict), ("results", list)):
        if not isinstance(data.get(key), kind):
            raise UsageError(f"{path}: key {key!r} must be a {kind.__name__}, got "
                             f"{data.get(key)!r:.80}")
    if isinstance(data.get("provenance"), dict):
        check_provenance(data["provenance"], f"{path}: provenance")


def _checked(path: str | Path, data: Any, store: ResultStore,
             accept_interpreted: bool) -> tuple[Evaluator, list[_Record]]:
    """The evaluator and every record of a results file, all checked against its study."""
    spec = store.study_spec(data["study"])
    spec_ev = data["evaluator"]
    evaluator = build_evaluator(str(spec_ev.get("name")), spec_ev.get("options") or {})
    if spec_ev.get("version", evaluator.version) != evaluator.version:
        raise UsageError(f"{path}: measured by {evaluator.name} version {spec_ev['version']}, "
                         f"this dse has version {evaluator.version}; export the configs again")
    checker = _Checker(path, spec, evaluator, accept_interpreted)
    records = [checker.record(i, entry) for i, entry in enumerate(data["results"])]
    return evaluator, [r for r in records if r is not None]


def read_results(path: str | Path) -> dict[str, Any]:
    """The results file at ``path``, checked to be one (its records are checked by
    :func:`ingest`, against the study)."""
    data = read_json(path, "results file")
    _check_file(path, data)
    return data


def ingest(store: ResultStore, path: str | Path, data: dict[str, Any] | None = None,
           accept_interpreted: bool = False) -> dict[str, int]:
    """Store a results file (``data``: as :func:`read_results` read it, else read now): all of
    it, or nothing when a record is bad; returns how many results it held, how many
    evaluations and trials were new, and how many results were already stored with another
    status (the stored one is kept: a result is never replaced). Results of Triton's CPU
    interpreter are refused unless ``accept_interpreted``."""
    data = read_results(path) if data is None else data
    evaluator, records = _checked(path, data, store, accept_interpreted)
    provenance = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    added = store.ingest_results(
        data["study"], evaluator,
        [(r.ctx.workload.to_dict(), r.ctx.space.name, r.params, r.result) for r in records],
        provenance)
    if added["trials"]:  # the frame kept when the study's run ended is stale now
        store.keep_frame(data["study"])
    return {"results": len(data["results"]), **added}
