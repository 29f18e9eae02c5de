"""Which columns a table of configurations shows, in the dashboard and in the static report."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from dse.core.fidelity import CONFIRMED

# Shown after the parameters and the objectives: throughput, and what explains a config's time
# and footprint.
SUMMARY_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance", "l1_bytes",
                   "dram_bytes")


def config_columns(frame: pd.DataFrame, varying: Iterable[str], objectives: Iterable[str],
                   workload_columns: Iterable[str] = ()) -> list[str]:
    """The columns of ``frame`` a table shows: the trial number, ``workload_columns`` (for a
    study of several workloads), the ``varying`` parameters, the ``objectives``, the summary
    metrics, evaluator (and fidelity, where a ladder confirmed some rows: the evaluator alone
    does not tell them apart) and status, and the reason when a row was not ok."""
    confirmed = "fidelity" in frame and frame["fidelity"].eq(CONFIRMED.name).any()
    columns = ["number", *workload_columns, *varying, *objectives, *SUMMARY_METRICS,
               "evaluator", *(["fidelity"] if confirmed else []), "status"]
    if "reason" in frame and frame["reason"].fillna("").astype(str).ne("").any():
        columns.append("reason")
    return [c for c in dict.fromkeys(columns) if c in frame.columns]


def trial_series(frame: pd.DataFrame) -> np.ndarray:
    """Each trial's series in the history, distribution and model-against-measurement plots:
    its evaluator, with ", confirmed" where a ladder confirmed the result (its evaluator is the
    first measurement's, so without it a ladder's best few would show twice in one series)."""
    evaluators = frame["evaluator"].astype(str).to_numpy()
    if "fidelity" not in frame:
        return evaluators
    return np.where(frame["fidelity"].eq(CONFIRMED.name).to_numpy(),
                    np.char.add(evaluators, ", confirmed"), evaluators)
