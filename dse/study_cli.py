"""Study commands: ``dse run``, ``dse studies``, ``dse best``, ``dse trials``."""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from dse.cli_args import add_backend_options, backend_options, positive_int
from dse.errors import UsageError
from dse.formatting import key_values, table
from dse.storage import DEFAULT_STORAGE
from dse.study.filters import apply_filter
from dse.study.paging import trial_page
from dse.study.query import best_trials, list_studies, load_trials
from dse.study.runner import RunSummary, run_study
from dse.study.spec import load_study

TILES = ("m_ct", "k_ct", "n_ct", "k_mt")
SHOWN_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance",
                 "macs_per_cycle", "l1_bytes", "l2_bytes", "dram_bytes")
FORMATS = ("table", "csv", "json", "parquet")


def _storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default=None,
                   help=f"database URL or SQLite path (default: the study file's, else "
                   f"./{DEFAULT_STORAGE})")


class _Progress:
    """A progress bar per workload with the best objective so far (on a terminal)."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._bars: dict[str, Any] = {}
        self._best: dict[str, float] = {}

    def __call__(self, workload: str, done: int, total: int, best: float | None,
                 direction: str = "maximize") -> None:
        bar = self._bars.get(workload)
        if bar is None:
            bar = self._bars[workload] = self._tqdm(
                total=total or None, desc=workload, unit="trial", file=sys.stderr,
                disable=not sys.stderr.isatty(), leave=True)
        if best is not None and best == best:
            pick = max if direction == "maximize" else min
            self._best[workload] = pick(self._best.get(workload, best), best)
        bar.n = done
        bar.set_postfix(best=f"{self._best.get(workload, float('nan')):.4g}", refresh=True)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()


def cmd_run(args: argparse.Namespace) -> int:
    """``dse run``: run or resume a study file; prints a summary per workload (and what
    ``--offline`` wrote); 130 when interrupted."""
    spec = load_study(args.study)
    if spec.ladder and args.trials is not None:
        raise UsageError("--trials sets a sampler's budget; a ladder's rungs have their own "
                         "(keep, and budget: {trials: N} on a rung)")
    spec = spec.with_overrides(trials=args.trials, workers=args.workers)
    progress = _Progress()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # kill, docker stop, Slurm: as Ctrl-C
    try:
        summary = run_study(spec, args.storage, args.ray_address, progress, args.offline)
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.close()
    storage = args.storage if args.storage is not None else spec.storage
    _print_summary(summary, storage)
    if args.offline is not None:
        _print_offline(summary, args, storage)
    if summary.status == "interrupted":
        print(f"interrupted: what finished is stored; run `{_run_command(args)}` again to "
              "resume", file=sys.stderr)
        return 130
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops a run as Ctrl-C does: what finished is committed, the study released."""
    raise KeyboardInterrupt


def _run_command(args: argparse.Namespace) -> str:
    """The ``dse run`` command line that resumes this run (same study, storage and options)."""
    words = ["dse", "run", args.study]
    for option in ("storage", "trials", "workers", "ray_address", "offline"):
        value = getattr(args, option)
        if value is not None:
            words += ["--" + option.replace("_", "-"), str(value)]
    return shlex.join(words)


def _storage_option(storage: str | None) -> str:
    """`` --storage STORAGE`` for a command shown to the user (nothing for the default)."""
    return f" --storage {shlex.quote(storage)}" if storage else ""


def _print_offline(summary: RunSummary, args: argparse.Namespace, storage: str | None) -> None:
    """What ``--offline`` wrote and the three steps that finish the study."""
    export = summary.offline
    if export is None:
        print(f"\nevery rung ran here: nothing written to {args.offline}")
        return
    if not export.configs:
        print(f"\nevery config of the {export.evaluator.name} rung has a stored result: the "
              f"study is complete ({args.offline} lists none)")
        return
    runner = Path(__file__).parent / "offline" / "runner.py"
    again = f"run {args.study}{_storage_option(args.storage)} --offline {args.offline}"
    print(f"\n{len(export.configs)} configs for the {export.evaluator.name} rung written to "
          f"{args.offline}"
          + (f" ({len(export.skipped)} skipped: {export.skipped[0]})" if export.skipped else "")
          + f".\nOn the machine that can run them: `python3 runner.py {args.offline} "
          f"results.json` (copy {runner}; it needs Python and what the jobs import).\nThen here: "
          f"`dse ingest results.json{_storage_option(storage)}` and `dse {again}` again to "
          "finish the ladder.")


def _print_summary(summary: RunSummary, storage: str | None) -> None:
    print(f"study {summary.study}: {summary.status} in {summary.elapsed_s:.1f} s "
          f"({summary.storage})")
    frame = load_trials(storage, summary.study)
    best = best_trials(frame, top=1)
    for w in summary.workloads:
        print(f"\n{w.workload.label}: "
              f"{w.trials} trials; this run evaluated {w.evaluated}, served {w.cached} from "
              f"the store, {w.infeasible} infeasible, {w.failed} failed"
              + (f", {w.exported} exported for the offline runner" if w.exported else ""))
        rows = best[(best["shape"] == w.workload.shape) & (best["dtype"] == w.workload.dtype.name)
                    & (best["b_layout"] == w.workload.b_layout)] if not best.empty else best
        if rows.empty:
            print("  no feasible configuration found yet")
            continue
        if len(rows) > 1:
            print(f"  Pareto front ({len(rows)} configs):")
            print(table(rows.to_dict("records"), (*TILES, *_objective_columns(frame), "bound")))
            continue
        top = rows.iloc[0].to_dict()
        print(f"  best configuration (trial {top['number']}): "
              + ", ".join(f"{k}={top[k]}" for k in _param_columns(frame)))
        print(key_values({k: top[k] for k in SHOWN_METRICS if k in top and top[k] == top[k]},
                         indent="    "))
        if all(top.get(k) == top.get(k) and k in top
               for k in ("bound", "t_core_s", "t_comp_s", "t_mem_s", "balance")):
            print(f"  {top['bound']}-bound: the cores are busy {top['t_core_s'] * 1e3:.3f} ms "
                  f"(kernels {top['t_comp_s'] * 1e3:.3f} ms, the rest zeroing and C drains), "
                  f"DRAM {top['t_mem_s'] * 1e3:.3f} ms (balance t_comp/t_mem = "
                  f"{top['balance']:.2f})")


def _objective_columns(frame: pd.DataFrame) -> list[str]:
    return [o[0] for o in frame.attrs.get("objectives", [("tops", "maximize")])]


def _param_columns(frame: pd.DataFrame) -> list[str]:
    """Tile sizes plus every other parameter that varies in the study."""
    params = frame.attrs.get("params", [])
    varying = [c for c in params if c not in TILES and c in frame.columns
               and frame[c].nunique() > 1]
    return [c for c in TILES if c in params] + varying


def cmd_studies(args: argparse.Namespace) -> int:
    """``dse studies``: the studies in the database, one line each (or JSON)."""
    frame = list_studies(args.storage)
    if args.json:
        print(frame.to_json(orient="records", date_format="iso", indent=2))
    elif frame.empty:
        print("no studies")
    else:
        print(table(frame.to_dict("records"), list(frame.columns)))
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    """``dse best``: a study's best configurations (its Pareto front for several objectives) as a
    table (or JSON)."""
    frame = load_trials(args.storage, args.study)
    best = best_trials(frame, args.top)
    if args.json:
        print(best.to_json(orient="records", date_format="iso", indent=2))
        return 0
    if best.empty:
        print(f"study {args.study} has no ok trial yet")
        return 0
    columns = ["number", "shape", "dtype", *_param_columns(frame),
               *dict.fromkeys([*_objective_columns(frame), "tops", "latency_s", "bound",
                               "balance", "l1_bytes"])]
    print(table(best.to_dict("records"), columns))
    return 0


def cmd_trials(args: argparse.Namespace) -> int:
    """``dse trials``: a study's trials, filtered and sorted, as a table, CSV, JSON or Parquet; with
    ``--limit`` or ``--offset``, one page cut in SQL."""
    if args.limit is not None or args.offset:
        # a page is filtered, sorted and cut in SQL: only its rows are read
        sort = args.sort or "number"
        if args.desc and not sort.startswith("-"):
            sort = f"-{sort}"
        page = trial_page(args.storage, args.study, where=args.where, sort=sort,
                          offset=args.offset, limit=50 if args.limit is None else args.limit)
        frame = page.frame
        shown = (f"trials {page.offset + 1}-{page.offset + len(frame)}" if len(frame)
                 else "no trials")
        print(f"{shown} of {page.total} matching", file=sys.stderr)
    else:
        frame = _filtered_sorted(args)
    return _write_trials(frame, args)


def _filtered_sorted(args: argparse.Namespace) -> pd.DataFrame:
    frame = load_trials(args.storage, args.study)
    if args.where:
        frame = apply_filter(frame, args.where)
    if args.sort:
        key = args.sort.lstrip("-")
        if key not in frame.columns:
            raise UsageError(f"--sort: unknown column {key!r}; columns: "
                             f"{', '.join(map(str, frame.columns))}")
        descending = args.desc or args.sort.startswith("-")
        frame = frame.sort_values(key, ascending=not descending, kind="stable")
    return frame


def _write_trials(frame: pd.DataFrame, args: argparse.Namespace) -> int:
    if args.format == "parquet" and not args.out:
        raise UsageError("--format parquet writes a binary file: give --out FILE")
    out = Path(args.out) if args.out else None
    if args.format == "table":
        columns = [c for c in ("number", "shape", "dtype", "status", *_param_columns(frame),
                               "tops", "latency_s", "bound", "reason") if c in frame.columns]
        text = table(frame.to_dict("records"), columns) if len(frame) else "no trials"
    elif args.format == "csv":
        text = frame.to_csv(index=False)
    elif args.format == "json":
        text = frame.to_json(orient="records", date_format="iso", indent=2)
    else:
        frame.to_parquet(out, index=False)
        print(f"wrote {len(frame)} trials to {out}", file=sys.stderr)
        return 0
    if out:
        out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        print(f"wrote {len(frame)} trials to {out}", file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_fidelity(args: argparse.Namespace) -> int:
    """``dse fidelity``: how well each ladder rung ranked the next one's configs, per workload (or
    JSON)."""
    from dse.study.query import fidelity_report

    report = fidelity_report(args.storage, args.study)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    elif not report:
        print(f"study {args.study} has no ladder results")
    else:
        print(table(report, ("workload", "rung", "cheaper", "dearer", "n", "spearman",
                             "kendall", "top_k", "top_k_overlap")))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``dse export-configs``: write a study's best configs for the offline runner; prints how many
    and the steps that follow, 1 when the evaluator can measure none of them."""
    from dse.offline.exchange import export_configs

    written, skipped = export_configs(args.storage, args.study, args.top, args.out,
                                      args.evaluator, backend_options(args.option))
    for reason in skipped:
        print(f"skipped: {reason}", file=sys.stderr)
    if not written:
        print(f"no config of study {args.study!r} can be measured by {args.evaluator}: "
              f"{args.out} lists none", file=sys.stderr)
        return 1
    runner = Path(__file__).parent / "offline" / "runner.py"
    print(f"wrote {written} configs to {args.out}; measure them with `python3 runner.py "
          f"{args.out} results.json` (copy {runner}), then "
          f"`dse ingest results.json{_storage_option(args.storage)}`")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """``dse ingest``: store the offline runner's results; prints what was new."""
    from dse.offline.ingest import ingest

    added = ingest(args.storage, args.results, args.accept_interpreted)
    print(f"{added['results']} results: {added['evaluations']} new evaluations, "
          f"{added['trials']} new trials")
    if added["differ"]:
        print(f"{added['differ']} results differ in status from the stored ones, which are kept "
              "(a stored result is never replaced; to measure those configs again, run the "
              "study under a new name or into another database)", file=sys.stderr)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``dse calibrate``: refit a model's coefficients to a study's measurements and write a new
    target file; prints the held-out error before and after (or JSON)."""
    from dse.calibrate_study import calibrate_study

    report = calibrate_study(args.storage, args.study, args.evaluator, args.against, args.out)
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
    """``dse balance``: per workload, the study's best and its bound, the model's best, the paper's
    path and the what-if table (or JSON)."""
    from dse.analysis.balance import balance_report

    reports = balance_report(args.storage, args.study, args.workload, args.top)
    if args.json:
        print(json.dumps(reports, indent=2, default=str))
        return 0
    for r in reports:
        print(f"== {r['workload']}: {r['evaluated']} configs evaluated "
              f"({', '.join(f'{v} {k}-bound' for k, v in r.get('bound_counts', {}).items())})")
        best = r.get("study_best")
        if best and best.get("bound"):
            print(f"study's best: {best['config']} at {best['tops']:.4g} TOPS "
                  f"({best['evaluator']}), {best['bound']}-bound by {best['margin']:.1%}")
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

    path = write_report(args.storage, args.study, args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained)")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """``dse dashboard``: serve the read-only web dashboard until interrupted."""
    from dse.dashboard import serve

    serve(args.storage, args.host, args.port)
    return 0


def cmd_optuna_export(args: argparse.Namespace) -> int:
    """``dse optuna-export``: write a study's Optuna state as a journal file for optuna-dashboard;
    prints how many lines."""
    from dse.study.optuna_export import export_journal

    lines = export_journal(args.storage, args.study, args.out)
    print(f"wrote {lines} journal lines to {args.out}; open it with `optuna-dashboard "
          f"{args.out}`")
    return 0


def add_study_commands(sub: Any) -> None:
    """Add the study commands (``dse run``, ``studies``, ``best``, ``trials`` and the rest) to
    ``sub``, the ``dse`` parser's subparsers."""
    run = sub.add_parser("run", help="run or resume a study file")
    run.add_argument("study", help="study file (YAML)")
    _storage_arg(run)
    run.add_argument("--workers", type=positive_int,
                     help="parallel evaluations (Ray) for evaluators that are not vectorised")
    run.add_argument("--trials", type=positive_int,
                     help="trials per workload (overrides budget.trials)")
    run.add_argument("--ray-address", help="existing Ray cluster to run evaluations on")
    run.add_argument("--offline", metavar="FILE.json",
                     help="a ladder rung whose evaluator cannot run here (the triton rung "
                     "without a GPU) writes its configs to FILE for the offline runner instead "
                     "of refusing; dse ingest the results and run again to finish")
    run.set_defaults(func=cmd_run)

    studies = sub.add_parser("studies", help="list studies with counts and best")
    _storage_arg(studies)
    studies.add_argument("--json", action="store_true")
    studies.set_defaults(func=cmd_studies)

    best = sub.add_parser("best", help="best configurations of a study (Pareto front for "
                          "several objectives)")
    best.add_argument("study")
    _storage_arg(best)
    best.add_argument("--top", type=positive_int, default=10)
    best.add_argument("--json", action="store_true")
    best.set_defaults(func=cmd_best)

    fidelity = sub.add_parser("fidelity", help="how well each ladder rung ranked the next one")
    fidelity.add_argument("study")
    _storage_arg(fidelity)
    fidelity.add_argument("--json", action="store_true")
    fidelity.set_defaults(func=cmd_fidelity)

    export = sub.add_parser("export-configs", help="write a study's best configs for a device "
                            "machine without dse")
    export.add_argument("study")
    _storage_arg(export)
    export.add_argument("--top", type=positive_int, default=10, help="configs per workload")
    export.add_argument("--out", required=True, metavar="FILE.json")
    export.add_argument("--evaluator", default="cpu", help="backend to measure with: cpu, iron "
                        "or triton")
    add_backend_options(export)
    export.set_defaults(func=cmd_export)

    ing = sub.add_parser("ingest", help="store measurements made by the offline runner")
    ing.add_argument("results", metavar="results.json")
    ing.add_argument("--accept-interpreted", action="store_true",
                     help="store results of Triton's CPU interpreter (to try the offline path "
                     "without a GPU; their timings are not the GPU's)")
    _storage_arg(ing)
    ing.set_defaults(func=cmd_ingest)

    cal = sub.add_parser("calibrate", help="refit a model's coefficients to a study's "
                         "measurements and write a new target file")
    cal.add_argument("study")
    _storage_arg(cal)
    cal.add_argument("--evaluator", default="analytical", help="the model to refit")
    cal.add_argument("--against", required=True, help="the evaluator whose results are truth")
    cal.add_argument("--out", help="new target file (default ./<target>-calibrated.toml)")
    cal.add_argument("--json", action="store_true")
    cal.set_defaults(func=cmd_calibrate)

    bal = sub.add_parser("balance", help="the balance point of a study's workloads, the paper's "
                         "path to it, and what-if sensitivity")
    bal.add_argument("study")
    _storage_arg(bal)
    bal.add_argument("--workload", help="one workload: MxKxN or 'MxKxN dtype'")
    bal.add_argument("--top", type=positive_int, default=10, help="model's best configs to list")
    bal.add_argument("--json", action="store_true")
    bal.set_defaults(func=cmd_balance)

    rep = sub.add_parser("report", help="one self-contained HTML file with a study's plots")
    rep.add_argument("study")
    _storage_arg(rep)
    rep.add_argument("--out", required=True, metavar="report.html")
    rep.set_defaults(func=cmd_report)

    dash = sub.add_parser("dashboard", help="read-only web dashboard of the studies in a "
                          "database")
    _storage_arg(dash)
    dash.add_argument("--host", default="127.0.0.1",
                      help="address to listen on (default 127.0.0.1: this machine only)")
    dash.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks one)")
    dash.set_defaults(func=cmd_dashboard)

    oex = sub.add_parser("optuna-export", help="a study's Optuna state as a journal file for "
                         "optuna-dashboard")
    oex.add_argument("study")
    _storage_arg(oex)
    oex.add_argument("--out", required=True, metavar="FILE.log")
    oex.set_defaults(func=cmd_optuna_export)

    trials = sub.add_parser("trials", help="query a study's trials")
    trials.add_argument("study")
    _storage_arg(trials)
    trials.add_argument("--where", metavar="EXPR", help="filter, e.g. \"tops > 30 and k_ct <= 64\"")
    trials.add_argument("--sort", metavar="KEY",
                        help="column to sort by (--sort=-KEY or --desc for descending)")
    trials.add_argument("--desc", action="store_true", help="sort in descending order")
    trials.add_argument("--limit", type=int, metavar="N",
                        help="only N trials (default 50 with --offset): filtered, sorted and "
                             "paged in the database, fast on large studies")
    trials.add_argument("--offset", type=int, default=0, metavar="N",
                        help="skip the first N matching trials")
    trials.add_argument("--format", choices=FORMATS, default="table")
    trials.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal")
    trials.set_defaults(func=cmd_trials)
