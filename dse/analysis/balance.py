"""``dse balance``: where compute time meets memory time, per workload of a study.

For each workload: the best configuration the study measured (by its most faithful results)
and which side bounds it by how much; the analytical model's best configurations over the whole
space; the family's balance procedure, when it has one (XDNA: the paper's, k_ct lowered step by
step, m_ct * n_ct maximised) with t_comp and t_mem at every step; how the evaluated configs
split between compute- and memory-bound; and what-if sensitivity: the best throughput and the
balanced config when the knobs the family names (memory bandwidth, on-chip memory, the clock)
change by -50 %, -25 %, +25 %, +50 % (the analytical model on edited copies of the target).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dse.core.errors import UsageError
from dse.core.evaluator import EvalContext, Evaluator
from dse.core.registry import build_context, build_evaluator, family
from dse.storage.frames import best_trials
from dse.storage.store import ResultStore
from dse.study.strategies.search import exhaustive

FACTORS = (0.5, 0.75, 1.25, 1.5)


def _side(metrics: dict[str, Any]) -> dict[str, Any]:
    """Which side bounds a config, and by how much. The side is the evaluator's own ``bound``
    (the one ``dse run``, ``dse best`` and the dashboard show): the compute units' busy time
    (``t_core_s``: computing plus what cannot overlap, such as C drains) against DRAM time.
    Where an evaluator reports no busy time, the compute time stands for it."""
    t_comp, t_mem = metrics.get("t_comp_s"), metrics.get("t_mem_s")
    if not t_comp or not t_mem:
        return {}
    busy = metrics.get("t_core_s") or t_comp
    bound = metrics.get("bound") or ("compute" if busy >= t_mem else "memory")
    margin = max(busy, t_mem) / min(busy, t_mem) - 1
    return {"bound": bound, "t_comp_s": t_comp, "t_busy_s": busy, "t_mem_s": t_mem,
            "margin": margin}


def _what_if(ctx: EvalContext, evaluator: Evaluator) -> list[dict[str, Any]]:
    rows = []
    for knob, edit in ctx.space.what_if_knobs().items():
        for factor in FACTORS:
            target = edit(factor)
            space = type(ctx.space)(target, ctx.workload)
            sub = dataclasses.replace(ctx, target=target, space=space)
            top = exhaustive(evaluator, sub, top=1).top
            if top:
                rows.append({"knob": knob, "factor": factor, "tops": top[0].metrics["tops"],
                             "config": space.describe(top[0].params), **_side(top[0].metrics)})
    return rows


def _balance_path(ctx: EvalContext, model: Evaluator) -> dict[str, Any]:
    """The family's balance procedure as report entries (``paper_*``), or why it could not
    run; nothing for a family without one."""
    own = family(ctx.space.name)
    if own.balance is None:
        return {}
    try:
        walk = own.walk_to_balance(model, ctx)
    except UsageError as exc:  # the rest of the report stands without the procedure
        return {"paper_unavailable": str(exc)}
    describe = ctx.space.describe
    start = walk.steps[0]
    return {
        "paper_path": [{"step": st["step"], "config": describe(st), "shape": st["shape"],
                        "tops": st["tops"], "t_comp_s": st["t_comp_s"],
                        "t_mem_s": st["t_mem_s"], "bound": st["bound"]} for st in walk.steps],
        "single_core_best": {"config": describe(start), "bound": start["bound"],
                             "memory_over_compute": start["t_mem_s"] / start["t_comp_s"]},
        "paper_balanced": describe(walk.top[0].params)}


def balance_report(store: ResultStore, study: str, workload: str | None = None,
                   top: int = 10) -> list[dict[str, Any]]:
    """``dse balance``: one report per workload of ``study`` (only ``workload``, given as ``MxKxN``
    or ``MxKxN dtype``, when set), as the module docstring lists; ``top`` model configs each."""
    frame = store.load_trials(study)
    target_name = store.study_spec(study)["target"]
    model = build_evaluator("analytical")
    reports = []
    if frame.empty:
        raise UsageError(f"study {study!r} has no trials yet: run it first")
    groups = frame.groupby(["shape", "dtype", "b_layout"])
    chosen = [key for key in groups.groups if not workload or workload in (key[0],
                                                                            " ".join(key[:2]))]
    if workload and not chosen:
        listed = ", ".join(" ".join(key[:2]) for key in groups.groups)
        raise UsageError(f"--workload {workload!r} is not one of study {study!r}'s: {listed}")
    for shape, dtype, layout in chosen:
        group = groups.get_group((shape, dtype, layout))
        group.attrs = frame.attrs
        ctx = build_context(target_name, dtype, shape, layout)
        describe = ctx.space.describe
        report: dict[str, Any] = {"workload": f"{shape} {dtype} (B {layout})",
                                  "evaluated": int((group["status"] == "ok").sum())}
        if "bound" in group:
            report["bound_counts"] = {str(k): int(v) for k, v in
                                      group["bound"].value_counts().items()}
        best = best_trials(group, top=1)
        if not best.empty:
            row = best.iloc[0].to_dict()
            report["study_best"] = {"config": describe(row), "tops": row.get("tops"),
                                    "evaluator": row.get("evaluator"), **_side(row)}
        ranked = exhaustive(model, ctx, top=top).top
        report["model_best"] = [{"rank": i + 1, "config": describe(c.params),
                                 "tops": c.metrics["tops"], **_side(c.metrics)}
                                for i, c in enumerate(ranked)]
        report.update(_balance_path(ctx, model))
        report["what_if"] = _what_if(ctx, model)
        reports.append(report)
    return reports
