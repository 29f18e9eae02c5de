"""``dse calibrate STUDY --evaluator analytical --against cpu``: refit a cheap model's free
coefficients to the measurements a study stored, and write a new target file.

The fit minimises the squared log-ratio of predicted to measured time, with a small pull
towards the current values (few measurements should not move many coefficients far; one at 0,
an effect the file leaves out, starts at a small share of its bound and moves freely). Its error
is reported on held-out measurements by 3-fold cross-validation (every third trial in a fold):
each measurement predicted by coefficients fitted without it, against the current
coefficients' error; the written file holds the fit on all measurements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.core.errors import UsageError
from dse.core.registry import (
    build_context,
    build_evaluator,
    evaluator_names,
    load_target,
    search_space_class,
)
from dse.core.target import dotted_value, rewrite_toml, with_dotted
from dse.storage.frames import most_faithful
from dse.storage.store import ResultStore

RIDGE = 0.1  # weight of the pull towards the current coefficients (log scale)
FOLDS = 3
LOG_RANGE = 5.0  # a coefficient moves at most e^5 either way
ZERO_START = 0.01  # a coefficient at 0 starts at this share of its upper bound


@dataclass(frozen=True)
class CalibrationReport:
    """What :func:`calibrate_study` fitted (``section.key`` -> value), the held-out error (``mape``,
    ``spearman``) of the old and new coefficients, and the file written."""

    fitted: dict[str, float]
    before: dict[str, float]  # held-out error of the old coefficients
    after: dict[str, float]
    n_fit: int
    n_held_out: int
    out: Path


def _errors(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    rel = predicted / measured - 1
    return {"mape": float(np.mean(np.abs(rel))),
            "spearman": float(pd.Series(predicted).corr(pd.Series(measured),
                                                        method="spearman"))}


def _start_value(value: float, upper: float | None) -> float:
    """Where the fit of one coefficient starts. The fit moves coefficients by factors, so a 0
    (an effect the file leaves out, such as XDNA2's merging of reads) starts at a small share of
    its bound; a share above its peak starts at the peak (the fit keeps it there)."""
    if value <= 0 and upper is not None:
        return upper * ZERO_START
    return min(value, np.inf if upper is None else upper)


def calibrate_study(store: ResultStore, study: str, evaluator: str, against: str,
                    out: str | Path | None = None) -> CalibrationReport:
    """Refit the constants the family declares calibratable (its space's ``calibratable``)
    to the study's ok results of ``against`` (at least 6), as ``evaluator`` predicts them, and
    write the new target file to ``out`` (default ``<target>-calibrated.toml``)."""
    if against not in evaluator_names():
        raise UsageError(f"--against: unknown evaluator {against!r}; valid: "
                         f"{', '.join(evaluator_names())}")
    if against == evaluator:
        raise UsageError(f"--against {against}: a model is calibrated against another "
                         "evaluator's results (measurements), not its own")
    frame = store.load_trials(study)
    target_name = store.study_spec(study)["target"]
    params = frame.attrs.get("params", [])
    # one result per config: a ladder's confirmed result over the rung's first measurement
    measured = most_faithful(frame[frame["evaluator"] == against], params)
    measured = measured[measured["status"] == "ok"]
    if len(measured) < 6:
        raise UsageError(f"study {study!r} has {len(measured)} ok results of {against!r}; "
                         "calibration needs at least 6")
    target = load_target(target_name)
    model = build_evaluator(evaluator)
    free = search_space_class(target.space).calibratable
    if not free or not model.capabilities.score:
        raise UsageError(f"no calibration of {evaluator!r} for {target.space} targets")
    rows = measured.reset_index(drop=True)
    cases = []
    for (shape, dtype, layout), group in rows.groupby(["shape", "dtype", "b_layout"]):
        ctx = build_context(target_name, dtype, shape, layout)
        batch = ctx.space.encode([ctx.space.resolve({k: r[k] for k in params})
                                  for _, r in group.iterrows()])
        cases.append((ctx, batch, group.index.to_numpy(), group["latency_s"].to_numpy()))
    order = np.concatenate([c[2] for c in cases])
    fold = np.searchsorted(np.sort(order), order) % FOLDS  # every FOLDS-th trial, in order
    measured_s = np.concatenate([c[3] for c in cases])

    def predict(t: Any) -> np.ndarray:
        out_ = []
        for ctx, batch, _, _ in cases:
            ctx = dataclasses.replace(ctx, target=t, space=type(ctx.space)(t, ctx.workload))
            out_.append(model.score(batch, ctx)["latency_s"])
        return np.concatenate(out_)

    keys = [c.dotted for c in free]
    current = np.array([dotted_value(target, c.dotted) for c in free], dtype=float)
    start = np.array([_start_value(value, c.upper) for c, value in zip(free, current,
                                                                        strict=True)])
    # a coefficient at 0 has no value in the log scale to be pulled back to: it moves freely
    ridge = np.where(current > 0, RIDGE, 0.0)
    upper = np.array([LOG_RANGE if c.upper is None
                      else max(min(LOG_RANGE, np.log(c.upper / value)), 1e-9)
                      for c, value in zip(free, start, strict=True)])

    def fitted_on(mask: np.ndarray) -> Any:
        def residual(x: np.ndarray) -> np.ndarray:
            t = with_dotted(target, dict(zip(keys, start * np.exp(x), strict=True)))
            fit_error = np.log(predict(t)[mask] / measured_s[mask])
            return np.concatenate([fit_error, ridge * x])  # stay near the old values

        from scipy.optimize import least_squares

        x = least_squares(residual, np.zeros(len(keys)), bounds=(-LOG_RANGE, upper)).x
        return with_dotted(target, dict(zip(keys, start * np.exp(x), strict=True)))

    # held-out error: each fold predicted by coefficients fitted on the other folds
    cross = np.empty_like(measured_s)
    for k in range(FOLDS):
        cross[fold == k] = predict(fitted_on(fold != k))[fold == k]
    final = fitted_on(np.ones_like(fold, dtype=bool))
    values = {key: float(dotted_value(final, key)) for key in keys}
    destination = Path(out or f"{target.name}-calibrated.toml")
    destination.write_text(rewrite_toml(Path(target.source).read_text(encoding="utf-8"), values),
                           encoding="utf-8")
    return CalibrationReport(
        fitted=values, before=_errors(predict(target), measured_s),
        after=_errors(cross, measured_s), n_fit=len(measured_s),
        n_held_out=len(measured_s), out=destination)
