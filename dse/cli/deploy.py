"""From a study to deployment: ``dse cover`` (the few kernels that serve a study's mix best, the
K curve, the dispatch table), ``dse dispatch export`` (the table as a C header or a Python
module), ``dse dispatch check`` (a table audited on any shapes) and ``dse cover-report`` (the
same mix across targets, in one HTML file)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dse.core.commands import add_storage_option, positive_int, study_name

MAX_CANDIDATES = 64  # a shape's candidates: each is scored on every shape of the mix


def candidates_per_shape(text: str) -> int:
    """An argparse type: a shape's candidates, 1 to :data:`MAX_CANDIDATES`."""
    value = positive_int(text)
    if value > MAX_CANDIDATES:
        raise argparse.ArgumentTypeError(f"at most {MAX_CANDIDATES}, got {value:,}")
    return value


OBJECTIVE_HELP = ("time: the mix's total time (its throughput) as small as it can be; worst: "
                  "the worst shape's loss against its own optimum")


def cmd_cover(args: argparse.Namespace) -> int:
    """``dse cover``: the K curve, the chosen kernels and each shape's loss; ``--out`` writes
    the dispatch table."""
    from dse.core.errors import UsageError
    from dse.deploy.cover import NoCover
    from dse.deploy.plan import plan_study
    from dse.deploy.table import write_table

    # read only, unless measuring across shapes adds trials to the study
    args.store = args.open_store("existing" if args.measure_across else "read")
    if args.measure_across:
        _measure_across(args)
    try:
        plan = plan_study(args.store, args.study, args.kernels, args.objective, args.candidates)
    except NoCover as exc:
        raise UsageError(str(exc)) from None
    if args.out:
        write_table(plan.table, args.out)
    if args.json:
        print(json.dumps({**plan.table, "curve": _curve_rows(plan)}, indent=1))
        return 0
    _print_plan(plan)
    if args.out:
        print(f"wrote {args.out}: {len(plan.table['kernels'])} kernels, "
              f"{len(plan.table['rules'])} rules, fallback kernel {plan.table['fallback']} "
              "(dse dispatch export it as a C header or a Python module)")
    return 0


def _measure_across(args: argparse.Namespace) -> None:
    """``--measure-across``: each shape's candidates measured on the other shapes first."""
    import sys

    from dse.deploy.problem import measure_across

    def progress(shape: str, n: int) -> None:
        print(f"measuring {n} candidate kernels on {shape}", file=sys.stderr, flush=True)

    counts = measure_across(args.store, args.study, args.candidates, progress)
    print(f"measured across shapes: {counts['measured']} new results, {counts['known']} pairs "
          f"measured before, {counts['refused']} outside a shape's domains", file=sys.stderr)


def _curve_rows(plan: Any) -> list[dict[str, Any]]:
    problem = plan.problem
    total_ops = float((problem.weights * problem.ops).sum())
    rows = []
    for k, cover in enumerate(plan.curve, start=1):
        if cover is None:
            rows.append({"kernels": k, "note": "no set of this many runs every shape"})
            continue
        seconds = problem.optimal_seconds().sum() / cover.fraction
        rows.append({"kernels": k, "mix_tops": total_ops / seconds / 1e12,
                     "of_optimum": cover.fraction, "worst_loss": cover.worst_loss,
                     "exact": cover.exact, "method": cover.method,
                     **({"bound": cover.bound} if cover.bound is not None else {})})
    return rows


def _print_plan(plan: Any) -> None:
    from dse.core.formatting import table
    from dse.deploy.table import kernel_lines

    problem, cover = plan.problem, plan.cover
    optimum = "exact (the exhaustive search)" if problem.exact else \
        "the best the study found"
    print(f"study {problem.study}: {len(problem.workloads)} shapes on {problem.target} "
          f"({problem.evaluator['name']}), {len(problem.candidates)} candidate kernels; each "
          f"shape's optimum: {optimum}")
    rows = []
    for row in _curve_rows(plan):
        shown = {"kernels": row["kernels"]}
        if "note" in row:
            shown["mix TOPS"] = row["note"]
        else:
            shown.update({"mix TOPS": row["mix_tops"], "of optimum": f"{row['of_optimum']:.1%}",
                          "worst loss": f"{row['worst_loss']:.1%}",
                          "exact": "yes" if row["exact"] else
                          f"no (bound {row.get('bound', float('nan')):.1%})"})
        rows.append(shown)
    print(table(rows, ("kernels", "mix TOPS", "of optimum", "worst loss", "exact")))
    if plan.stops_paying:
        print(f"one more kernel adds less than 1 % of the optimum past {plan.stops_paying}")
    share = problem.seconds()[range(len(cover.assign)),
                              [cover.kernels[a] for a in cover.assign]]
    print(f"\n{cover.k} kernel{'s' if cover.k > 1 else ''} ({cover.objective}), "
          f"{cover.fraction:.1%} of the optimum:")
    lines, shared = kernel_lines(plan.table)
    for n, line in enumerate(lines):
        served = cover.assign == n
        print(f"  kernel {n}: {line}\n    serves {int(served.sum())} shapes, "
              f"{share[served].sum() / share.sum():.0%} of the mix's time")
    if shared and len(lines) > 1:
        print(f"  every kernel: {shared}")
    print(table([{"shape": s["shape"], "calls": s["weight"], "kernel": s["kernel"],
                  "TOPS": s["tops"], "optimum": s["optimum_tops"], "loss": f"{s['loss']:.1%}",
                  "bound": s["bound"]} for s in plan.table["shapes"]],
                ("shape", "calls", "kernel", "TOPS", "optimum", "loss", "bound")))


def cmd_export(args: argparse.Namespace) -> int:
    """``dse dispatch export``: the table as a C header (``--c``) and/or a Python module
    (``--python``)."""
    from pathlib import Path

    from dse.core.errors import UsageError
    from dse.deploy.selector import python_module
    from dse.deploy.table import c_header, read_table

    if not args.c and not args.python:
        raise UsageError("give --c OUT.h and/or --python OUT.py")
    table = read_table(args.table)
    if args.c:
        Path(args.c).write_text(c_header(table, args.name), encoding="utf-8")
        print(f"wrote {args.c}: {args.name}_select(m, k, n) gives the index in "
              f"{args.name}_kernels")
    if args.python:
        Path(args.python).write_text(python_module(table), encoding="utf-8")
        print(f"wrote {args.python}: config(M, K, N) gives a kernel's parameters")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """``dse dispatch build``: the table's kernels, its dispatch and a general kernel for any
    shape compiled into one shared library and its header, by the table's family."""
    from dse.core.errors import UsageError
    from dse.core.registry import families
    from dse.deploy.table import read_table

    table = read_table(args.table)
    name = _family_name(table, args.table)
    family = families().get(name)
    if family is None or family.build_library is None:
        builders = sorted(name for name, f in families().items() if f.build_library)
        raise UsageError(f"{args.table}: the {name!r} family builds no library; "
                         f"tables of {', '.join(builders) or 'no family'} can be built")
    options = {"emulate": True} if args.emulate else {}
    paths = family.build_library(table, args.out, **options)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _family_name(table: dict, path: str) -> str:
    """The family whose kernels a table holds: its target's search space (a table ``dse cover``
    writes keeps the study's space options under ``space``; a hand-written one may name the
    space there instead)."""
    from dse.core.errors import UsageError
    from dse.core.registry import load_target

    if isinstance(table.get("space"), str):
        return table["space"]
    if not isinstance(table.get("target"), str):
        raise UsageError(f"{path}: the table names no target")
    return load_target(table["target"]).space


def cmd_check(args: argparse.Namespace) -> int:
    """``dse dispatch check``: each shape's kernel by the table's rules against the shape's own
    optimum."""
    from dse.core.formatting import table
    from dse.deploy.check import check_table, shapes_of
    from dse.deploy.table import read_table

    dispatch = read_table(args.table)
    tokens = _tokens(args.decode, args.prefill) if args.model else None
    report = check_table(dispatch, shapes_of(args.shapes, args.model, tokens))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(table([{"shape": r["shape"], "weight": r["weight"], "kernel": r["kernel"],
                  "TOPS": r["tops"] if r["runs"] else "cannot run",
                  "optimum": r["optimum_tops"], "loss": f"{r['loss']:.1%}",
                  "bound": r["bound"]} for r in report["shapes"]],
                ("shape", "weight", "kernel", "TOPS", "optimum", "loss", "bound")))
    if report["cannot_run"]:
        print(f"{report['cannot_run']} shape(s) get a kernel that cannot run them")
    else:
        print(f"weighted throughput: {report['fraction']:.1%} of every shape at its optimum")
    return 0


def _tokens(decode: str | None, prefill: str | None) -> dict[str, list[int]]:
    from dse.core.errors import UsageError

    out: dict[str, list[int]] = {}
    for phase, text in (("decode", decode), ("prefill", prefill)):
        if text:
            try:
                out[phase] = [int(t) for t in text.split(",") if t.strip()]
            except ValueError:
                raise UsageError(f"--{phase}: token counts separated by commas, got "
                                 f"{text[:60]!r}") from None
    return out


def cmd_cover_report(args: argparse.Namespace) -> int:
    """``dse cover-report``: one HTML file comparing the studies' covers (the K curves, each
    study's shapes x kernels and its per-shape losses)."""
    from dse.deploy.report import write_cover_report

    path = write_cover_report(args.store, args.studies, args.kernels, args.objective, args.out)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained)")
    return 0


def add_commands(sub: Any) -> None:
    """``dse cover``, ``dse dispatch export|build|check`` and ``dse cover-report``."""
    cover = sub.add_parser("cover", help="the few kernels that serve a study's mix best, the "
                           "curve of throughput against their number, the dispatch table")
    cover.add_argument("study", type=study_name)
    add_storage_option(cover, mode="deferred")
    cover.add_argument("--kernels", type=positive_int, default=4,
                       help="at most this many kernels (default 4)")
    cover.add_argument("--objective", choices=("time", "worst"), default="time",
                       help=OBJECTIVE_HELP)
    cover.add_argument("--candidates", type=candidates_per_shape, default=8,
                       help="best configs each shape offers as candidates (default 8, at most "
                       f"{MAX_CANDIDATES})")
    cover.add_argument("--measure-across", action="store_true",
                       help="first measure each shape's candidates on every other shape with "
                       "the study's evaluator (stored as trials of the study): a measured "
                       "study's cover of fewer kernels than shapes needs those pairs")
    cover.add_argument("--out", metavar="table.json", help="write the dispatch table")
    cover.add_argument("--json", action="store_true")
    cover.set_defaults(func=cmd_cover)

    dispatch = sub.add_parser("dispatch", help="export, build or audit a dispatch table")
    verbs = dispatch.add_subparsers(dest="verb", required=True)
    export = verbs.add_parser("export", help="a dispatch table as a C header or Python module")
    export.add_argument("table", help="a dispatch table (dse cover --out)")
    export.add_argument("--c", metavar="OUT.h", help="write a C header")
    export.add_argument("--python", metavar="OUT.py", help="write a Python module")
    export.add_argument("--name", default="dse", help="the C header's prefix (default dse)")
    export.set_defaults(func=cmd_export)
    build = verbs.add_parser("build", help="a table's kernels as a shared library a program "
                             "links (and its header)")
    build.add_argument("table", help="a dispatch table (dse cover --out)")
    build.add_argument("--out", required=True, metavar="libdsegemm.so")
    build.add_argument("--emulate", action="store_true",
                       help="AMX tiles computed in C (checks on a CPU without AMX; slow)")
    build.set_defaults(func=cmd_build)
    check = verbs.add_parser("check", help="a table's loss on any shapes against their optima")
    check.add_argument("table", help="a dispatch table (dse cover --out)")
    check.add_argument("--shapes", help="MxKxN[*WEIGHT],... (weight: how often it runs)")
    check.add_argument("--model", help="a model preset (the GEMMs of its mix)")
    check.add_argument("--decode", help="with --model: decode batch sizes, e.g. 1,8,32")
    check.add_argument("--prefill", help="with --model: prefill lengths, e.g. 512,2048")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)

    report = sub.add_parser("cover-report", help="one HTML file comparing studies' covers "
                            "(the same mix on several targets)")
    report.add_argument("studies", nargs="+", type=study_name)
    add_storage_option(report)
    report.add_argument("--kernels", type=positive_int, default=4)
    report.add_argument("--objective", choices=("time", "worst"), default="time",
                        help=OBJECTIVE_HELP)
    report.add_argument("--out", required=True, metavar="report.html")
    report.set_defaults(func=cmd_cover_report)
