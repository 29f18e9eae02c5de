"""One GEMM at a time: ``dse evaluate``, ``dse search`` and ``dse targets``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from dse.cli.common import add_backend_options, add_problem_args, backend_options
from dse.core.commands import name_values, positive_int
from dse.core.errors import UsageError, read_json
from dse.core.suggest import did_you_mean

if TYPE_CHECKING:
    from dse.core.family_record import Family
    from dse.core.outcome import SearchOutcome
    from dse.core.results import EvalResult
    from dse.core.space import SearchSpace

OUTCOME_METRICS = ("tops", "macs_per_cycle", "t_comp_s", "t_mem_s", "bound", "stage",
                   "l1_bytes", "l2_bytes", "r_in")


def _result_json(params: dict[str, Any], result: EvalResult) -> dict[str, Any]:
    # Metrics appear both nested and at the top level, so scripts can use either.
    out = result.to_dict()
    metrics = out.pop("metrics")
    return {**result.metrics, **out, "params": params, "metrics": metrics}


def _print_result(params: dict[str, Any], result: EvalResult) -> None:
    from dse.core.formatting import key_values

    print(f"status: {result.status.value}")
    if result.reason:
        print(f"reason: {result.reason}")
    print("params:\n" + key_values(params))
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
    from dse.core.evaluator import require_fits
    from dse.core.registry import build_context, build_evaluator
    from dse.core.results import Status

    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout, args.constraint)
    evaluator = build_evaluator(args.evaluator, backend_options(args.option))
    require_fits(evaluator, ctx)
    problem = evaluator.unavailable()
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
        if len(resolved) != 1 or not evaluator.capabilities.timeline:
            raise UsageError("--trace needs one configuration (--param) and an evaluator that "
                             "records a timeline (--evaluator simulator)")
        if not ctx.space.check(batch).ok[0]:
            raise UsageError(f"--trace: the configuration is infeasible: "
                             f"{ctx.space.explain(batch, 0)}")
        evaluator.simulate(batch, ctx, trace_path=args.trace)
        print(f"wrote the timeline to {args.trace} (open it in https://ui.perfetto.dev)",
              file=sys.stderr)
    results = evaluator.evaluate(batch, ctx)
    configs = ctx.space.decode(batch)  # the results are theirs by position
    if args.json:
        payload: Any = [_result_json(p, r) for p, r in zip(configs, results, strict=True)]
        print(json.dumps(payload if args.configs else payload[0], indent=2))
    else:
        for i, (params, result) in enumerate(zip(configs, results, strict=True)):
            if len(results) > 1:
                print(f"--- config {i}")
            _print_result(params, result)
    return 0 if all(r.status is Status.OK for r in results) else 1


def _print_outcome(outcome: SearchOutcome, strategy: str, space: SearchSpace) -> None:
    from dse.core.formatting import table

    print(f"{strategy} search: {outcome.n_total:,} configs in the parameter box, "
          f"{outcome.n_evaluated:,} generated, {outcome.n_feasible:,} feasible, "
          f"{outcome.elapsed_s:.2f} s")
    if outcome.rejected_by:
        print("rejected by: " + ", ".join(f"{k} {v:,}" for k, v in outcome.rejected_by.items()))
    if outcome.n_scored is not None:
        _print_pruning(outcome)
    if outcome.steps:
        print("\nbalance procedure steps:")
        print(table(outcome.steps, ("step", *space.kernel_keys, "shape", "macs_per_cycle",
                                    "t_comp_s", "t_mem_s", "bound", "tops")))
    if not outcome.top:
        print("\nno configuration is feasible (see what rejected them above)")
        return
    rows = [{"rank": i + 1, **c.params, **c.metrics} for i, c in enumerate(outcome.top)]
    params = list(outcome.top[0].params)
    tiles = [p for p in space.kernel_keys if p in params] or params[:3]
    varying = [p for p in params if p not in tiles and
               len({str(c.params[p]) for c in outcome.top}) > 1]
    metrics = [m for m in OUTCOME_METRICS if m in outcome.top[0].metrics]
    print("\nbest configurations:" if len(rows) > 1 else "\nbalanced configuration:")
    print(table(rows, ("rank", *tiles, *varying, *metrics)))


def _print_pruning(outcome: SearchOutcome) -> None:
    """What a branch-and-bound scored, what it dropped at each level and why."""
    print(f"scored {outcome.n_scored:,} configs; the top is exact (branch-and-bound: every "
          "sub-space left out has a bound below the last config shown)")
    pruned = [f"{level} {count:,}" for level, count in outcome.pruned.items() if count]
    if pruned:
        print("sub-spaces pruned by their bound: " + ", ".join(pruned))
    by_reason: dict[str, list[str]] = {}
    for name, why in outcome.dominated.items():
        by_reason.setdefault(why, []).append(name)
    if by_reason:
        print("dominated choices, not enumerated but placed after the configs they shadow: "
              + "; ".join(f"{', '.join(names)} ({why})" for why, names in by_reason.items()))


def _progress_printer() -> Callable[[int, int], None]:
    """Progress on stderr for searches over many parameter combinations."""

    def report(done: int, total: int) -> None:
        if total < 4:
            return
        end = "\n" if done == total else ""
        print(f"\rsearching: {done}/{total} parameter combinations", end=end, file=sys.stderr,
              flush=True)

    return report


class ProcedureParser(argparse.ArgumentParser):
    """The options a space's balance procedure declares, read from what ``dse search`` did
    not know; every mistake a :class:`UsageError`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def options(self, extras: Sequence[str]) -> dict[str, Any]:
        """The options given among ``extras``, as the procedure's keywords."""
        try:
            parsed, unknown = self.parse_known_args(list(extras))
        except argparse.ArgumentError as exc:
            raise UsageError(str(exc)) from None
        if unknown:
            flags = [a.option_strings[0] for a in self._actions if a.option_strings]
            hints = did_you_mean(unknown[0].split("=")[0], flags) if unknown[0][:2] == "--" else ""
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}{hints}"
                             + (f"; the balance procedure takes {', '.join(flags)}" if flags
                                else ""))
        return {k: v for k, v in vars(parsed).items() if v is not None}


def procedure_parser(family: Family) -> ProcedureParser:
    """A parser of the options ``family``'s balance procedure declares
    (:class:`dse.core.ProcedureOption`)."""
    parser = ProcedureParser(prog=f"dse search --strategy paper (the {family.name} space)",
                             add_help=False, allow_abbrev=False, exit_on_error=False)
    for option in family.balance_options:
        parser.add_argument(option.flag, dest=option.keyword, type=option.parse,
                            metavar=option.metavar, help=option.help)
    return parser


def cmd_search(args: argparse.Namespace) -> int:
    """``dse search``: the exhaustive search or the family's balance procedure (``paper``) over
    one GEMM's space; prints the best configurations (or JSON), 1 when none is feasible."""
    from dse.core.evaluator import require_fits
    from dse.core.registry import build_context, build_evaluator, family
    from dse.study.strategies.search import exhaustive

    ctx = build_context(args.target, args.dtype, args.shape, args.b_layout, args.constraint)
    own = family(ctx.space.name)
    procedure = procedure_parser(own)
    if args.procedure_help:
        print(procedure.format_help())
        return 0
    given = procedure.options(args.extras)
    evaluator = build_evaluator(args.evaluator)
    require_fits(evaluator, ctx)
    fix = name_values(args.fix, "--fix")
    if args.strategy == "paper":
        if args.free:
            raise UsageError("--free applies to --strategy exhaustive only")
        outcome = own.walk_to_balance(evaluator, ctx, fix=fix, **given)
    else:
        if given:
            flags = [o.flag for o in own.balance_options if o.keyword in given]
            raise UsageError(f"{', '.join(flags)}: options of the balance procedure, for "
                             "--strategy paper only")
        free = args.free
        if "all" in free:  # every parameter not fixed
            free = [name for name in ctx.space.params() if name not in (fix or {})]
        outcome = exhaustive(evaluator, ctx, fix=fix, free=free, top=args.top,
                             progress=_progress_printer(), prune=not args.no_prune)
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        _print_outcome(outcome, args.strategy, ctx.space)
    return 0 if outcome.top else 1


def cmd_targets(args: argparse.Namespace) -> int:
    """``dse targets``: the shipped targets, one line each (or JSON)."""
    from dse.core.formatting import table
    from dse.core.registry import available_targets, load_target

    rows = []
    for name in available_targets():
        t = load_target(name)
        units, clock = t.compute_units()
        rows.append({"name": name, "space": t.space, "array": units,
                     "clock_GHz": clock / 1e9 if clock else "",
                     "dtypes": ",".join(t.dtypes), "description": t.description})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(rows, ("name", "space", "array", "clock_GHz", "dtypes")))
    return 0


def add_commands(sub: Any) -> None:
    """``dse evaluate``, ``dse search`` and ``dse targets``."""
    ev = sub.add_parser("evaluate", help="score one configuration (or a JSON list of them)")
    add_problem_args(ev)
    ev.add_argument("--param", action="append", metavar="NAME=VALUE",
                    help="a parameter value; the space's tile sizes are required (XDNA: "
                    "m_ct, k_ct, n_ct, k_mt; systolic arrays: t_m, t_k, t_n; each family's "
                    "page in docs/families/ lists its parameters)")
    ev.add_argument("--configs", metavar="FILE.json", help="JSON list of parameter objects")
    ev.add_argument("--trace", metavar="FILE.json",
                    help="with --evaluator simulator: write a Chrome trace-event timeline")
    add_backend_options(ev)
    ev.set_defaults(func=cmd_evaluate)

    se = sub.add_parser("search", help="search the design space of one GEMM")
    add_problem_args(se)
    se.add_argument("--fix", action="append", metavar="NAME=VALUE", help="pin a parameter")
    se.add_argument("--free", action="append", default=[], metavar="NAME",
                    help="also vary a parameter that otherwise keeps its default ('all': "
                    "every parameter not fixed)")
    se.add_argument("--no-prune", action="store_true",
                    help="score every config instead of pruning with the space's bounds (the "
                    "same top, slower; for comparison)")
    se.add_argument("--top", type=positive_int, default=10,
                    help="how many configurations to report")
    se.add_argument("--strategy", choices=("exhaustive", "paper"), default="exhaustive",
                    help="paper: the family's own walk to the balance point, which takes the "
                    "options its space declares (e.g. XDNA's --start MxKxN, --k-mt N, "
                    "--patience N); --procedure-help lists a target's")
    se.add_argument("--procedure-help", action="store_true",
                    help="list the options of the target's balance procedure and exit")
    # what the parser does not know is the balance procedure's, read once the space is built
    se.set_defaults(func=cmd_search, keeps_extras=True, extras=[])

    tg = sub.add_parser("targets", help="list the shipped targets")
    tg.add_argument("--json", action="store_true")
    tg.set_defaults(func=cmd_targets)
