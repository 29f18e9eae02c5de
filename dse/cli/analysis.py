"""What a stored study says: ``dse fidelity``, ``dse calibrate``, ``dse balance``,
``dse report``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dse.core.commands import add_storage_option, positive_int, study_name


def cmd_fidelity(args: argparse.Namespace) -> int:
    """``dse fidelity``: how well each ladder rung ranked the next one's configs, per workload (or
    JSON)."""
    from dse.core.formatting import table

    report = args.store.fidelity_report(args.study)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    elif not report:
        print(f"study {args.study} has no ladder results")
    else:
        print(table(report, ("workload", "rung", "cheaper", "dearer", "n", "spearman",
                             "kendall", "top_k", "top_k_overlap")))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``dse calibrate``: refit a model's coefficients to a study's measurements and write a new
    target file; prints the held-out error before and after (or JSON)."""
    from dse.core.formatting import key_values
    from dse.study.calibrate import calibrate_study

    report = calibrate_study(args.store, args.study, args.evaluator, args.against, args.out)
    if args.json:
        print(json.dumps({"fitted": report.fitted, "before": report.before,
                          "after": report.after, "n_fit": report.n_fit,
                          "n_held_out": report.n_held_out, "out": str(report.out)}, indent=2))
        return 0
    print(f"fitted on {report.n_fit} measurements; error on held-out ones (3-fold "
          "cross-validation), current coefficients -> refitted:")
    print(f"  mean |error| {report.before['mape']:.1%} -> {report.after['mape']:.1%}, "
          f"Spearman {report.before['spearman']:.3f} -> {report.after['spearman']:.3f}")
    print(key_values(report.fitted))
    print(f"wrote {report.out} (use it with --target {report.out})")
    return 0


def cmd_balance(args: argparse.Namespace) -> int:
    """``dse balance``: per workload, the study's best and its bound, the model's best, the
    family's balance procedure and the what-if table (or JSON)."""
    from dse.analysis.balance import balance_report
    from dse.core.formatting import table

    reports = balance_report(args.store, args.study, args.workload, args.top)
    if args.json:
        print(json.dumps(reports, indent=2, default=str))
        return 0
    for r in reports:
        print(f"== {r['workload']}: {r['evaluated']} configs evaluated "
              f"({', '.join(f'{v} {k}-bound' for k, v in r.get('bound_counts', {}).items())})")
        best = r.get("study_best")
        if best and best.get("bound"):
            print(f"study's best: {best['config']} at {best['tops']:.4g} TOPS "
                  f"({best['evaluator']}), {best['bound']}-bound: compute units busy "
                  f"{best['t_busy_s'] * 1e3:.3f} ms against DRAM {best['t_mem_s'] * 1e3:.3f} ms "
                  f"({best['margin']:.1%} apart)")
        if "paper_unavailable" in r:
            print(f"paper's procedure: {r['paper_unavailable']}")
        if "single_core_best" in r:
            s = r["single_core_best"]
            print(f"best single-core kernel {s['config']}: {s['bound']}-bound here "
                  f"(t_mem/t_comp = {s['memory_over_compute']:.2f})")
            print(f"paper's procedure ends at {r['paper_balanced']}; its steps (each kernel "
                  "at the multiple of its native size nearest the workload, as the paper "
                  "measured):")
            print(table(r["paper_path"], ("step", "config", "shape", "t_comp_s", "t_mem_s",
                                          "bound", "tops")))
        print("model's best (exhaustive over the space's enumerated configs):")
        print(table(r["model_best"], ("rank", "config", "tops", "bound", "margin")))
        if r.get("what_if"):
            print("what if (best throughput and its config on an edited target):")
            print(table(r["what_if"], ("knob", "factor", "tops", "config", "bound")))
        print()
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``dse report``: write the study's self-contained HTML report; prints its path and size."""
    from dse.analysis.report import write_report

    path = write_report(args.store, args.study, args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained)")
    return 0


def add_commands(sub: Any) -> None:
    """``dse fidelity``, ``dse calibrate``, ``dse balance`` and ``dse report``."""
    fidelity = sub.add_parser("fidelity", help="how well each ladder rung ranked the next one")
    fidelity.add_argument("study", type=study_name)
    add_storage_option(fidelity)
    fidelity.add_argument("--json", action="store_true")
    fidelity.set_defaults(func=cmd_fidelity)

    cal = sub.add_parser("calibrate", help="refit a model's coefficients to a study's "
                         "measurements and write a new target file")
    cal.add_argument("study", type=study_name)
    add_storage_option(cal)
    cal.add_argument("--evaluator", default="analytical", help="the model to refit")
    cal.add_argument("--against", required=True, help="the evaluator whose results are truth")
    cal.add_argument("--out", help="new target file (default ./<target>-calibrated.toml)")
    cal.add_argument("--json", action="store_true")
    cal.set_defaults(func=cmd_calibrate)

    bal = sub.add_parser("balance", help="the balance point of a study's workloads, the paper's "
                         "path to it, and what-if sensitivity")
    bal.add_argument("study", type=study_name)
    add_storage_option(bal)
    bal.add_argument("--workload", help="one workload: MxKxN or 'MxKxN dtype'")
    bal.add_argument("--top", type=positive_int, default=10, help="model's best configs to list")
    bal.add_argument("--json", action="store_true")
    bal.set_defaults(func=cmd_balance)

    rep = sub.add_parser("report", help="one self-contained HTML file with a study's plots")
    rep.add_argument("study", type=study_name)
    add_storage_option(rep)
    rep.add_argument("--out", required=True, metavar="report.html")
    rep.set_defaults(func=cmd_report)
