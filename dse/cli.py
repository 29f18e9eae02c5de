"""Command line: ``dse evaluate``, ``dse search``, ``dse targets`` and the study commands
(``dse run``, ``dse studies``, ``dse best``, ``dse trials``).

Exit status: 0 success, 1 a configuration is infeasible (or failed), 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dse.cli_args import (
    add_backend_options,
    backend_options,
    name_values,
    positive_int,
    refuse_database_as_out,
)
from dse.errors import DseError, UsageError, read_json
from dse.formatting import key_values, table
from dse.paper_strategy import paper_strategy
from dse.problem import build_context, build_evaluator
from dse.registry import command_adders, evaluator_names
from dse.results import EvalResult, Status
from dse.search import SearchOutcome, exhaustive
from dse.study_cli import add_study_commands
from dse.target import available_targets, load_target

SUMMARY_METRICS = ("tops", "latency_s", "t_comp_s", "t_mem_s", "bound", "balance",
                   "macs_per_cycle", "l1_bytes", "l2_bytes", "dram_bytes")
TILE_COLUMNS = ("m_ct", "k_ct", "n_ct", "k_mt")
PAPER_PATIENCE = 3


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", required=True, help="target name (see `dse targets`) or .toml path")
    p.add_argument("--dtype", required=True, help="input-output types, e.g. int8-int8, bf16-bf16 "
                   "(one type: the same out, e.g. bf16)")
    p.add_argument("--shape", required=True, help="GEMM size MxKxN, e.g. 4096x4096x4096; a "
                   "batched GEMM (ascend-950pr) BxMxKxN, e.g. 8x2048x1024x2048")
    p.add_argument("--b-layout", default=None, help="B in DRAM: col (default) or row; for a "
                   "batched GEMM which operands are transposed: NN (default), NT, TN, TT")
    p.add_argument("--evaluator", default="analytical", help="evaluator name (default analytical)")
    p.add_argument("--constraint", action="append", default=[], metavar="NAME",
                   help="also enforce an optional rule: dma_bound (eq. 4), no_padding")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _result_json(result: EvalResult) -> dict[str, Any]:
    # Metrics appear both nested and at the top level, so scripts can use either.
    return {**result.metrics, **result.to_dict()}


def _print_result(result: EvalResult) -> None:
    print(f"status: {result.status.value}")
    if result.reason:
        print(f"reason: {result.reason}")
    print("params:\n" + key_values(result.params))
    if result.metrics:
        print("metrics:\n" + key_values(result.metrics))


def _load_configs(path: str) -> list[dict[str, Any]]:
    data = read_json(path, "--configs: file")
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise UsageError(f"--configs: {path} must hold a JSON list of parameter objects")
    return data


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``dse evaluate``: score the ``--param`` config (or each of ``--configs``) and print status,
    params and metrics (or JSON); 1 when any is not ok."""
    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout, args.constraint)
    evaluator = build_evaluator(args.evaluator, backend_options(args.option))
    problem = evaluator.unavailable() if hasattr(evaluator, "unavailable") else None
    if problem:
        raise UsageError(f"evaluator {evaluator.name!r} cannot run here: {problem}")
    if args.configs and args.param:
        raise UsageError("give either --param or --configs, not both")
    given = _load_configs(args.configs) if args.configs else [name_values(args.param, "--param")]
    resolved = []
    for index, config in enumerate(given):
        try:
            resolved.append(ctx.space.resolve(config))
        except UsageError as exc:
            where = f"config {index} of {args.configs}: " if args.configs else ""
            raise UsageError(f"{where}{exc}") from None
    batch = ctx.space.encode(resolved)
    if args.trace:
        if len(resolved) != 1 or not hasattr(evaluator, "simulate"):
            raise UsageError("--trace needs one configuration (--param) and an evaluator that "
                             "records a timeline (--evaluator simulator)")
        if not ctx.space.check(batch).ok[0]:
            raise UsageError(f"--trace: the configuration is infeasible: "
                             f"{ctx.space.explain(batch, 0)}")
        evaluator.simulate(batch, ctx, trace_path=args.trace)
        print(f"wrote the timeline to {args.trace} (open it in https://ui.perfetto.dev)",
              file=sys.stderr)
    results = evaluator.evaluate(batch, ctx)
    if args.json:
        payload: Any = [_result_json(r) for r in results] if args.configs else _result_json(
            results[0])
        print(json.dumps(payload, indent=2))
    else:
        for i, result in enumerate(results):
            if len(results) > 1:
                print(f"--- config {i}")
            _print_result(result)
    return 0 if all(r.status is Status.OK for r in results) else 1


def _print_outcome(outcome: SearchOutcome, strategy: str) -> None:
    print(f"{strategy} search: {outcome.n_total:,} configs in the parameter box, "
          f"{outcome.n_evaluated:,} generated, {outcome.n_feasible:,} feasible, "
          f"{outcome.elapsed_s:.2f} s")
    if outcome.rejected_by:
        print("rejected by: " + ", ".join(f"{k} {v:,}" for k, v in outcome.rejected_by.items()))
    if outcome.steps:
        print("\nbalance procedure steps:")
        print(table(outcome.steps, ("step", *TILE_COLUMNS, "shape", "macs_per_cycle", "t_comp_s",
                                    "t_mem_s", "bound", "tops")))
    if not outcome.top:
        print("\nno configuration is feasible (see what rejected them above)")
        return
    rows = [{"rank": i + 1, **c.params, **c.metrics} for i, c in enumerate(outcome.top)]
    params = list(outcome.top[0].params)
    tiles = [p for p in params if p in TILE_COLUMNS] or params[:3]
    varying = [p for p in params if p not in tiles and
               len({str(c.params[p]) for c in outcome.top}) > 1]
    metrics = [m for m in ("tops", "macs_per_cycle", "t_comp_s", "t_mem_s", "bound", "stage",
                           "l1_bytes", "l2_bytes", "r_in")
               if m in outcome.top[0].metrics]
    print("\nbest configurations:" if len(rows) > 1 else "\nbalanced configuration:")
    print(table(rows, ("rank", *tiles, *varying, *metrics)))


def _progress_printer() -> Callable[[int, int], None]:
    """Progress on stderr for searches over many parameter combinations."""

    def report(done: int, total: int) -> None:
        if total < 4:
            return
        end = "\n" if done == total else ""
        print(f"\rsearching: {done}/{total} parameter combinations", end=end, file=sys.stderr,
              flush=True)

    return report


def _parse_start(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--start expects m_ctxk_ctxn_ct, e.g. 64x232x64; got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def cmd_search(args: argparse.Namespace) -> int:
    """``dse search``: the exhaustive search or the paper's balance procedure over one GEMM's space;
    prints the best configurations (or JSON), 1 when none is feasible."""
    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout, args.constraint)
    evaluator = build_evaluator(args.evaluator)
    fix = name_values(args.fix, "--fix")
    if args.strategy == "paper":
        if args.free:
            raise UsageError("--free applies to --strategy exhaustive only")
        outcome = paper_strategy(evaluator, ctx, fix=fix, start=_parse_start(args.start),
                                 k_mt_target=args.k_mt, patience=args.patience)
    else:
        if args.start or args.k_mt or args.patience != PAPER_PATIENCE:
            raise UsageError("--start, --k-mt and --patience apply to --strategy paper only")
        outcome = exhaustive(evaluator, ctx, fix=fix, free=args.free, top=args.top,
                             progress=_progress_printer())
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        _print_outcome(outcome, args.strategy)
    return 0 if outcome.top else 1


def cmd_compare(args: argparse.Namespace) -> int:
    """``dse compare``: the simulator against the analytical model on sampled configs; prints their
    rank correlation and largest disagreements (or JSON)."""
    from dse.compare import compare
    from dse.storage import ResultStore

    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout)
    store = ResultStore(args.storage)
    frame, spearman = compare(ctx, args.samples, args.seed, store)
    if args.json:
        print(json.dumps({"spearman": spearman, "configs": frame.to_dict("records")}, indent=2))
        return 0
    diff = frame["difference"].abs()
    print(f"{len(frame)} configs of {args.shape} {args.dtype} on {args.target}: Spearman rank "
          f"correlation {spearman:.3f}; |difference| median {diff.median():.1%}, "
          f"max {diff.max():.1%}; both fidelities stored in {store.safe_url}")
    print("\nlargest disagreements (difference = simulator / analytical - 1):")
    top = frame.head(args.top).to_dict("records")
    print(table(top, (*TILE_COLUMNS, "analytical_tops", "simulator_tops", "difference",
                      "reason")))
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    """``dse targets``: the shipped targets, one line each (or JSON)."""
    rows = []
    for name in available_targets():
        t = load_target(name)
        units, clock = t.compute_units() if hasattr(t, "compute_units") else ("host", None)
        rows.append({"name": name, "space": t.space, "array": units,
                     "clock_GHz": clock / 1e9 if clock else "",
                     "dtypes": ",".join(t.dtypes), "description": t.description})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(rows, ("name", "space", "array", "clock_GHz", "dtypes")))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``dse`` argument parser: every command, the target families' own included."""
    parser = argparse.ArgumentParser(prog="dse", description="GEMM design-space exploration")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="score one configuration (or a JSON list of them)")
    _add_problem_args(ev)
    ev.add_argument("--param", action="append", metavar="NAME=VALUE",
                    help="a parameter value; tile sizes m_ct, k_ct, n_ct, k_mt are required")
    ev.add_argument("--configs", metavar="FILE.json", help="JSON list of parameter objects")
    ev.add_argument("--trace", metavar="FILE.json",
                    help="with --evaluator simulator: write a Chrome trace-event timeline")
    add_backend_options(ev)
    ev.set_defaults(func=cmd_evaluate)

    se = sub.add_parser("search", help="search the design space of one GEMM")
    _add_problem_args(se)
    se.add_argument("--fix", action="append", metavar="NAME=VALUE", help="pin a parameter")
    se.add_argument("--free", action="append", default=[], metavar="NAME",
                    help="also vary a parameter that otherwise keeps its default")
    se.add_argument("--top", type=positive_int, default=10,
                    help="how many configurations to report")
    se.add_argument("--strategy", choices=("exhaustive", "paper"), default="exhaustive")
    se.add_argument("--start", metavar="MxKxN", help="paper strategy: kernel to start from")
    se.add_argument("--k-mt", type=positive_int, metavar="N",
                    help="paper strategy: use the largest multiple of k_ct <= N as k_mt, as the "
                    "paper did (default: each kernel's fastest feasible k_mt)")
    se.add_argument("--patience", type=positive_int, default=PAPER_PATIENCE, metavar="N",
                    help="paper strategy: stop after N steps without a new best (the paper: 1)")
    se.set_defaults(func=cmd_search)

    add_study_commands(sub)

    co = sub.add_parser("compare", help="simulator against analytical model on sampled configs")
    for flag in ("--target", "--dtype", "--shape"):
        co.add_argument(flag, required=True)
    co.add_argument("--b-layout", default=None)
    co.add_argument("--samples", type=positive_int, default=50)
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--top", type=positive_int, default=8, help="disagreements to list")
    co.add_argument("--storage", default=None, help="where both fidelities' results are stored "
                    "(default ./dse.db)")
    co.add_argument("--json", action="store_true")
    co.set_defaults(func=cmd_compare)

    tg = sub.add_parser("targets", help="list the shipped targets")
    tg.add_argument("--json", action="store_true")
    tg.set_defaults(func=cmd_targets)
    for add_commands in command_adders():  # target families' own commands (dse ascend ...)
        add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dse`` command in ``argv`` (default: the process's arguments) and return its exit
    status; an unknown evaluator, a ``DseError`` or a path that cannot be used is printed and
    gives 2, Ctrl-C 130."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage and the bad option (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    func: Callable[[argparse.Namespace], int] = args.func
    name = getattr(args, "evaluator", None)
    if isinstance(name, str) and name not in evaluator_names():
        print(f"dse: error: unknown evaluator {name!r}; valid: "
              f"{', '.join(evaluator_names())}", file=sys.stderr)
        return 2
    try:
        refuse_database_as_out(getattr(args, "out", None), getattr(args, "storage", None))
        return func(args)
    except DseError as exc:
        print(f"dse: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a study's run (which commits and says so)
        print("dse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`dse trials ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except UnicodeDecodeError as exc:  # a file read elsewhere than through read_text
        print(f"dse: error: a file given is not UTF-8 text ({exc.reason} at byte {exc.start})",
              file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # a path the user gave (--out, --configs, a results file) that cannot be used as one
        where = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
        print(f"dse: error: {where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
