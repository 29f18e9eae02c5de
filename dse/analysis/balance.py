"""``dse balance``: where compute time meets memory time, per workload of a study.

For each workload: the best configuration the study measured (by its most faithful results)
and which side bounds it by how much; the analytical model's best configurations over the whole
space; the paper's balance procedure (k_ct lowered step by step, m_ct * n_ct maximised) with
t_comp and t_mem at every step; how the evaluated configs split between compute- and
memory-bound; and what-if sensitivity: the best throughput and the balanced config when DRAM
bandwidth, L1 size or the clock change by -50 %, -25 %, +25 %, +50 % (the analytical model on
edited copies of the target).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dse.errors import UsageError
from dse.paper_strategy import paper_strategy
from dse.problem import build_context, build_evaluator
from dse.search import exhaustive
from dse.storage import ResultStore
from dse.study.query import best_trials, load_trials

FACTORS = (0.5, 0.75, 1.25, 1.5)
# What names a configuration in a line, per space: XDNA's tiles, Ascend's branch and block,
# the CPU's blocks.
KERNEL_KEYS = (("m_ct", "k_ct", "n_ct", "k_mt"),
               ("branch", "base_m", "base_k", "base_n", "single_core_m", "k_l1", "single_core_n"),
               ("BLOCK_M", "BLOCK_K", "BLOCK_N"), ("mc", "kc", "nc"))


def _kernel(params: dict[str, Any]) -> str:
    keys = next((k for k in KERNEL_KEYS if all(name in params for name in k)), ())
    if keys and keys[0] == "branch":  # Ascend: branch, L0 tile, a core's block
        return (f"{params['branch']} L0 " + "x".join(str(params[k]) for k in keys[1:4])
                + " block " + "x".join(str(params[k]) for k in keys[4:]))
    return "x".join(str(params[k]) for k in keys) or str(params)


def _knobs(t: Any) -> dict[str, Any]:
    """Edits of the target for what-if: memory bandwidth, L1 size and clock by a factor."""
    scale = dataclasses.replace
    if hasattr(t, "dram"):  # an XDNA array
        return {
            "dram bandwidth": lambda f: scale(t, dram=scale(
                t.dram, peak_bytes_per_s=t.dram.peak_bytes_per_s * f)),
            "L1 size": lambda f: scale(t, memory=scale(
                t.memory, l1_bytes=int(t.memory.l1_bytes * f))),
            "clock": lambda f: scale(t, array=scale(t.array, clock_hz=t.array.clock_hz * f))}
    if hasattr(t, "bandwidth"):  # an Ascend chip: compute rates scale with the clock
        return {
            "GM bandwidth": lambda f: t.with_values(
                bandwidth={"gm_bytes_per_s": t.bandwidth.gm_bytes_per_s * f}),
            "L1 size": lambda f: t.with_values(memory={"l1_bytes": int(t.memory.l1_bytes * f)}),
            "clock": lambda f: t.with_values(
                cores={"clock_hz": t.cores.clock_hz * f},
                compute={"cube_peak_flops": t.compute.cube_peak_flops * f,
                         "cube_sustained_flops": t.compute.cube_sustained_flops * f})}
    return {}


def _side(metrics: dict[str, Any]) -> dict[str, Any]:
    t_comp, t_mem = metrics.get("t_comp_s"), metrics.get("t_mem_s")
    if not t_comp or not t_mem:
        return {}
    bound = "compute" if t_comp >= t_mem else "memory"
    margin = max(t_comp, t_mem) / min(t_comp, t_mem) - 1
    return {"bound": bound, "t_comp_s": t_comp, "t_mem_s": t_mem, "margin": margin}


def _what_if(ctx: Any, evaluator: Any) -> list[dict[str, Any]]:
    rows = []
    for knob, edit in _knobs(ctx.target).items():
        for factor in FACTORS:
            target = edit(factor)
            space = type(ctx.space)(target, ctx.workload)
            sub = dataclasses.replace(ctx, target=target, space=space)
            top = exhaustive(evaluator, sub, top=1).top
            if top:
                rows.append({"knob": knob, "factor": factor, "tops": top[0].metrics["tops"],
                             "config": _kernel(top[0].params), **_side(top[0].metrics)})
    return rows


def balance_report(storage: str | None, study: str, workload: str | None = None,
                   top: int = 10) -> list[dict[str, Any]]:
    """``dse balance``: one report per workload of ``study`` (only ``workload``, given as ``MxKxN``
    or ``MxKxN dtype``, when set), as the module docstring lists; ``top`` model configs each."""
    store = ResultStore(storage, existing=True)
    frame = load_trials(store, study)
    with store.session() as s:
        target_name = store.require_study(s, study).spec["target"]
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
        report: dict[str, Any] = {"workload": f"{shape} {dtype} (B {layout})",
                                  "evaluated": int((group["status"] == "ok").sum())}
        if "bound" in group:
            report["bound_counts"] = {str(k): int(v) for k, v in
                                      group["bound"].value_counts().items()}
        best = best_trials(group, top=1)
        if not best.empty:
            row = best.iloc[0].to_dict()
            report["study_best"] = {"config": _kernel(row), "tops": row.get("tops"),
                                    "evaluator": row.get("evaluator"), **_side(row)}
        ranked = exhaustive(model, ctx, top=top).top
        report["model_best"] = [{"rank": i + 1, "config": _kernel(c.params),
                                 "tops": c.metrics["tops"], **_side(c.metrics)}
                                for i, c in enumerate(ranked)]
        walk = None
        if ctx.space.name == "xdna_gemm":
            try:
                walk = paper_strategy(model, ctx)
            except UsageError as exc:  # the rest of the report stands without the procedure
                report["paper_unavailable"] = str(exc)
        if walk is not None:
            report["paper_path"] = [
                {"step": st["step"], "config": _kernel(st), "shape": st["shape"],
                 "tops": st["tops"], "t_comp_s": st["t_comp_s"], "t_mem_s": st["t_mem_s"],
                 "bound": st["bound"]}
                for st in walk.steps]
            start = walk.steps[0]
            report["single_core_best"] = {
                "config": _kernel(start), "bound": start["bound"],
                "memory_over_compute": start["t_mem_s"] / start["t_comp_s"]}
            report["paper_balanced"] = _kernel(walk.top[0].params)
        report["what_if"] = _what_if(ctx, model)
        reports.append(report)
    return reports
