"""Running and reading studies: ``dse run``, ``dse studies``, ``dse best``, ``dse trials``."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dse.cli.common import open_store_of, storage_option
from dse.core.commands import add_storage_option, limited_int, positive_int, study_name
from dse.core.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from dse.study.runner import RunSummary

SHOWN_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance",
                 "macs_per_cycle", "l1_bytes", "l2_bytes", "dram_bytes")
FORMATS = ("table", "csv", "json", "parquet")
TABLE_CELL_WIDTH = 60  # characters a table cell shows; the rest of a long reason is cut
RUNNER = Path(__file__).parents[1] / "offline" / "runner.py"


def kernel_keys(frame: pd.DataFrame) -> tuple[str, ...]:
    """The parameters that name a config (its tile sizes) in the family of a trials frame; none
    when that family is not installed here (a study another machine ran into a shared
    database)."""
    from dse.core.errors import DseError
    from dse.core.registry import search_space_class

    space = frame.attrs.get("space")
    try:
        return search_space_class(space).kernel_keys if space else ()
    except DseError:
        return ()


def objective_columns(frame: pd.DataFrame) -> list[str]:
    """The study's objective metrics."""
    return [o[0] for o in frame.attrs.get("objectives", [("tops", "maximize")])]


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The tile sizes plus every other parameter that varies in the study."""
    params = frame.attrs.get("params", [])
    tiles = [c for c in kernel_keys(frame) if c in params]
    return tiles + [c for c in params if c not in tiles and c in frame.columns
                    and frame[c].nunique() > 1]


MANY_WORKLOADS = 50  # a study of more says why its first trial takes a while


def cmd_run(args: argparse.Namespace) -> int:
    """``dse run``: run or resume a study file; prints a summary per workload (and what
    ``--offline`` wrote); 130 when interrupted."""
    from dse.study.spec import load_study

    spec = load_study(args.study)  # a bad study file is refused before the rest loads
    if spec.ladder and args.trials is not None:
        raise UsageError("--trials sets a sampler's budget; a ladder's rungs have their own "
                         "(keep, and budget: {trials: N} on a rung)")
    spec = spec.with_overrides(trials=args.trials, workers=args.workers)
    from dse.cli.progress import ProgressBars
    from dse.study.runner import run_study

    store = open_store_of(args, "create", default=spec.storage)
    if len(spec.workloads) > MANY_WORKLOADS:  # seconds of checks before the first trial
        print(f"dse: checking the spaces of {len(spec.workloads)} workloads before the first "
              "trial", file=sys.stderr)
    progress = ProgressBars()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # kill, docker stop, Slurm: as Ctrl-C
    try:
        summary = run_study(spec, store, args.ray_address, progress, args.offline)
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.close()
    _print_summary(summary, store.load_trials(summary.study))
    if args.offline is not None:
        _print_offline(summary, args, args.storage if args.storage is not None else spec.storage)
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
    again = f"run {args.study}{storage_option(args.storage)} --offline {args.offline}"
    print(f"\n{len(export.configs)} configs for the {export.evaluator.name} rung written to "
          f"{args.offline}"
          + (f" ({len(export.skipped)} skipped: {export.skipped[0]})" if export.skipped else "")
          + f".\nOn the machine that can run them: `python3 runner.py {args.offline} "
          f"results.json` (copy {RUNNER}; it needs Python and what the jobs import).\nThen here: "
          f"`dse ingest results.json{storage_option(storage)}` and `dse {again}` again to "
          "finish the ladder.")


def _print_summary(summary: RunSummary, frame: pd.DataFrame) -> None:
    from dse.core.formatting import key_values, table
    from dse.storage.frames import best_trials

    print(f"study {summary.study}: {summary.status} in {summary.elapsed_s:.1f} s "
          f"({summary.storage})")
    best = best_trials(frame, top=1)
    for w in summary.workloads:
        counts = [f"this run evaluated {w.evaluated}"]
        if w.cached:
            counts.append(f"served {w.cached} from the store")
        if w.repeated:
            counts.append(f"{w.repeated} repeats the sampler asked for again")
        counts += [f"{w.infeasible} infeasible", f"{w.failed} failed"]
        if w.exported:
            counts.append(f"{w.exported} exported for the offline runner")
        if w.faults:
            counts.append(f"{w.faults} lost workers or nodes, their configs tried again "
                          f"(`dse faults {summary.study}`)")
        print(f"\n{w.workload.label}: {w.trials} trials; {', '.join(counts)}")
        rows = best[(best["shape"] == w.workload.shape) & (best["dtype"] == w.workload.dtype.name)
                    & (best["b_layout"] == w.workload.b_layout)] if not best.empty else best
        if rows.empty:
            print("  no feasible configuration found yet")
            continue
        if len(rows) > 1:
            print(f"  Pareto front ({len(rows)} configs):")
            # the kernel keys, and every other parameter the front's configs differ in
            keys = kernel_keys(frame)
            varying = [p for p in param_columns(frame)
                       if p not in keys and rows[p].nunique(dropna=False) > 1]
            print(table(rows.to_dict("records"), (*keys, *varying, *objective_columns(frame),
                                                  "bound")))
            continue
        top = rows.iloc[0].to_dict()
        print(f"  best configuration (trial {top['number']}): "
              + ", ".join(f"{k}={top[k]}" for k in param_columns(frame)))
        print(key_values({k: top[k] for k in SHOWN_METRICS if k in top and top[k] == top[k]},
                         indent="    "))
        rounds = top.get("confirm_rounds")
        # a ladder's confirmed result (a list, or an array from a kept frame; NaN elsewhere)
        if rounds is not None and not isinstance(rounds, str | float) and len(rounds):
            objective = objective_columns(frame)[0]
            print(f"  confirmed: {objective} {min(rounds):.4g}-{max(rounds):.4g} in "
                  f"{len(rounds)} rounds beside its contenders, {top['first_measured']:.4g} "
                  "when first measured")
        if all(top.get(k) == top.get(k) and k in top
               for k in ("bound", "t_core_s", "t_comp_s", "t_mem_s", "balance")):
            print(f"  {top['bound']}-bound: the compute units are busy "
                  f"{top['t_core_s'] * 1e3:.3f} ms ({top['t_comp_s'] * 1e3:.3f} ms of it "
                  f"computing), DRAM {top['t_mem_s'] * 1e3:.3f} ms "
                  f"(balance t_comp/t_mem = {top['balance']:.2f})")


def cmd_studies(args: argparse.Namespace) -> int:
    """``dse studies``: the studies in the database, one line each (or JSON)."""
    from dse.core.formatting import table

    frame = args.store.list_studies()
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
    from dse.core.formatting import table
    from dse.storage.frames import best_trials

    frame = args.store.load_trials(args.study)
    best = best_trials(frame, args.top)
    if args.json:
        print(best.to_json(orient="records", date_format="iso", indent=2))
        return 0
    if best.empty:
        print(f"study {args.study} has no ok trial yet")
        return 0
    columns = ["number", "shape", "dtype", *param_columns(frame),
               *dict.fromkeys([*objective_columns(frame), "tops", "latency_s", "bound",
                               "balance", "l1_bytes"])]
    print(table(best.to_dict("records"), columns))
    return 0


def cmd_faults(args: argparse.Namespace) -> int:
    """``dse faults``: the losses of Ray workers or nodes a study met, oldest first (or JSON)."""
    from dse.core.formatting import table

    frame = args.store.faults(args.study)
    if args.json:
        print(frame.to_json(orient="records", date_format="iso", indent=2))
    elif frame.empty:
        print(f"study {args.study} met no fault of the machinery")
    else:
        frame["message"] = frame["message"].map(lambda text: text.splitlines()[0][:80]
                                                if text else "")
        print(table(frame.to_dict("records"), list(frame.columns)))
    return 0


def cmd_trials(args: argparse.Namespace) -> int:
    """``dse trials``: a study's trials, filtered and sorted, as a table, CSV, JSON or Parquet; with
    ``--limit`` or ``--offset``, one page cut in SQL."""
    if args.limit is not None or args.offset:
        # a page is filtered, sorted and cut in SQL: only its rows are read
        sort = args.sort or "number"
        if args.desc and not sort.startswith("-"):
            sort = f"-{sort}"
        page = args.store.trial_page(args.study, where=args.where, sort=sort,
                                     offset=args.offset,
                                     limit=50 if args.limit is None else args.limit)
        frame = page.frame
        shown = (f"trials {page.offset + 1}-{page.offset + len(frame)}" if len(frame)
                 else "no trials")
        code = _write_trials(frame, args)
        sys.stdout.flush()  # the count follows the table, on a line of its own
        print(f"{shown} of {page.total} matching", file=sys.stderr)
        return code
    return _write_trials(_filtered_sorted(args), args)


def _filtered_sorted(args: argparse.Namespace) -> pd.DataFrame:
    from dse.storage.filters import apply_filter

    frame = args.store.load_trials(args.study)
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
    from dse.core.formatting import table

    if args.format == "parquet" and not args.out:
        raise UsageError("--format parquet writes a binary file: give --out FILE")
    out = Path(args.out) if args.out else None
    if args.format == "table":
        columns = [c for c in ("number", "shape", "dtype", "status", *param_columns(frame),
                               "tops", "latency_s", "bound", "reason") if c in frame.columns]
        # a reason can run to hundreds of characters: the table cuts it (CSV and JSON do not)
        text = (table(frame.to_dict("records"), columns, max_width=TABLE_CELL_WIDTH)
                if len(frame) else "no trials")
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


def add_commands(sub: Any) -> None:
    """``dse run``, ``dse studies``, ``dse best`` and ``dse trials``."""
    run = sub.add_parser("run", help="run or resume a study file")
    run.add_argument("study", help="study file (YAML)")
    add_storage_option(run, "deferred", "the study file's, else ./dse.db")
    run.add_argument("--workers", type=limited_int("workers"),
                     help="parallel evaluations (Ray) for evaluators that are not vectorised")
    run.add_argument("--trials", type=limited_int("budget.trials"),
                     help="trials per workload (overrides budget.trials)")
    run.add_argument("--ray-address", help="existing Ray cluster to run evaluations on")
    run.add_argument("--offline", metavar="FILE.json",
                     help="a ladder rung whose evaluator cannot run here (the triton rung "
                     "without a GPU) writes its configs to FILE for the offline runner instead "
                     "of refusing; dse ingest the results and run again to finish")
    run.set_defaults(func=cmd_run)

    studies = sub.add_parser("studies", help="list studies with counts and best")
    add_storage_option(studies)
    studies.add_argument("--json", action="store_true")
    studies.set_defaults(func=cmd_studies)

    best = sub.add_parser("best", help="best configurations of a study (Pareto front for "
                          "several objectives)")
    best.add_argument("study", type=study_name)
    add_storage_option(best)
    best.add_argument("--top", type=positive_int, default=10)
    best.add_argument("--json", action="store_true")
    best.set_defaults(func=cmd_best)

    faults = sub.add_parser("faults", help="the Ray workers or nodes a study lost (each "
                            "a fault, not a result: its configs were tried again)")
    faults.add_argument("study", type=study_name)
    add_storage_option(faults)
    faults.add_argument("--json", action="store_true")
    faults.set_defaults(func=cmd_faults)

    trials = sub.add_parser("trials", help="query a study's trials")
    trials.add_argument("study", type=study_name)
    add_storage_option(trials)
    trials.add_argument("--where", metavar="EXPR", help="filter, e.g. \"tops > 30 and k_ct <= 64\"")
    trials.add_argument("--sort", metavar="KEY",
                        help="column to sort by (--sort=-KEY or --desc for descending)")
    trials.add_argument("--desc", action="store_true", help="sort in descending order")
    trials.add_argument("--limit", type=limited_int("trials.limit"), metavar="N",
                        help="only N trials (default 50 with --offset): filtered, sorted and "
                             "paged in the database, fast on large studies")
    trials.add_argument("--offset", type=limited_int("trials.offset"), default=0, metavar="N",
                        help="skip the first N matching trials")
    trials.add_argument("--format", choices=FORMATS, default="table")
    trials.add_argument("--out", metavar="FILE", help="write to FILE instead of the terminal")
    trials.set_defaults(func=cmd_trials)
