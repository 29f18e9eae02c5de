"""Measurements made elsewhere: ``dse export-configs``, ``dse ingest`` and
``dse optuna-export``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dse.cli.common import add_backend_options, backend_options, open_store_of, storage_option
from dse.cli.studies import RUNNER
from dse.core.commands import add_storage_option, positive_int, study_name


def cmd_export(args: argparse.Namespace) -> int:
    """``dse export-configs``: write a study's best configs for the offline runner; prints how many
    and the steps that follow, 1 when the evaluator can measure none of them."""
    from dse.offline.exchange import export_configs

    written, skipped, evaluator = export_configs(args.store, args.study, args.top, args.out,
                                                 args.evaluator, backend_options(args.option))
    for reason in skipped:
        print(f"skipped: {reason}", file=sys.stderr)
    if not written:
        print(f"no config of study {args.study!r} can be measured by {evaluator}: "
              f"{args.out} lists none", file=sys.stderr)
        return 1
    print(f"wrote {written} configs for {evaluator} to {args.out}; measure them with "
          f"`python3 runner.py {args.out} results.json` (copy {RUNNER}), then "
          f"`dse ingest results.json{storage_option(args.storage)}`")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """``dse ingest``: store the offline runner's results; prints what was new."""
    from dse.offline.ingest import ingest, read_results

    data = read_results(args.results)  # a bad file is named before the database is opened
    added = ingest(open_store_of(args, "existing"), args.results, data, args.accept_interpreted)
    print(f"{added['results']} results: {added['evaluations']} new evaluations, "
          f"{added['trials']} new trials")
    if added["differ"]:
        print(f"{added['differ']} results differ in status from the stored ones, which are kept "
              "(a stored result is never replaced; to measure those configs again, run the "
              "study under a new name or into another database)", file=sys.stderr)
    return 0


def cmd_optuna_export(args: argparse.Namespace) -> int:
    """``dse optuna-export``: write a study as an Optuna journal file for optuna-dashboard (its
    real parameters, objectives and metrics); prints how many trials, with a progress bar on a
    terminal."""
    from tqdm import tqdm

    from dse.study.optuna_export import export_journal

    with tqdm(desc=f"{args.study} to {args.out}", unit="trial", file=sys.stderr,
              disable=not sys.stderr.isatty()) as bar:
        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        trials = export_journal(args.store, args.study, args.out, progress)
    print(f"wrote {trials} trials to {args.out}; open it with `optuna-dashboard {args.out}`")
    return 0


def add_commands(sub: Any) -> None:
    """``dse export-configs``, ``dse ingest`` and ``dse optuna-export``."""
    export = sub.add_parser("export-configs", help="write a study's best configs for a device "
                            "machine without dse")
    export.add_argument("study", type=study_name)
    add_storage_option(export)
    export.add_argument("--top", type=positive_int, default=10, help="configs per workload")
    export.add_argument("--out", required=True, metavar="FILE.json")
    export.add_argument("--evaluator", help="backend to measure with: cpu, iron or triton "
                        "(default: the one that measures the study's target)")
    add_backend_options(export)
    export.set_defaults(func=cmd_export)

    ing = sub.add_parser("ingest", help="store measurements made by the offline runner")
    ing.add_argument("results", metavar="results.json")
    ing.add_argument("--accept-interpreted", action="store_true",
                     help="store results of Triton's CPU interpreter (to try the offline path "
                     "without a GPU; their timings are not the GPU's)")
    add_storage_option(ing, "deferred")
    ing.set_defaults(func=cmd_ingest)

    oex = sub.add_parser("optuna-export", help="a study as an Optuna journal file for "
                         "optuna-dashboard (real parameters, every metric)")
    oex.add_argument("study", type=study_name)
    add_storage_option(oex)
    oex.add_argument("--out", required=True, metavar="FILE.log")
    oex.set_defaults(func=cmd_optuna_export)
