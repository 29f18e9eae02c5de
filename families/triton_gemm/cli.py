"""``dse triton compile``: the Triton GEMM of exported configs compiled for the target GPU's
architecture on this machine, no GPU needed.

It reads a configs file written for the ``triton`` evaluator (``dse run --offline`` or
``dse export-configs --evaluator triton``) and reports, per config, whether it compiles, the
shared memory Triton allocates next to the space's rule, the registers and spills ptxas
reports and whether the loads go through TMA: what the GPU would refuse or run slowly, found
before GPU time is spent.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
from typing import Any

from dse.core.commands import positive_int
from dse.core.errors import DseError, UsageError, read_json


def _read_configs(path: str) -> dict[str, Any]:
    data = read_json(path, "configs file")
    if not isinstance(data, dict) or data.get("format") != "dse-configs/1":
        raise UsageError(f"{path}: not a dse configs file (written by dse run --offline or dse "
                         "export-configs)")
    if data.get("evaluator", {}).get("name") != "triton":
        raise UsageError(f"{path}: its configs are for the "
                         f"{data.get('evaluator', {}).get('name')!r} evaluator; this compiles "
                         "the triton evaluator's kernel")
    return data


@functools.lru_cache
def _context(target: str, dtype: str, shape: str, b_layout: str) -> Any:
    from dse.core import build_context

    return build_context(target, dtype, shape, b_layout)  # one per workload of the file


def _checked_items(path: str, data: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """(workload, parameters) of every config of the file, checked against the space: what is
    compiled is what its parameters say (not a job edited apart from them)."""
    from dse.core import workload_from_dict

    items = data.get("configs")
    if not isinstance(items, list):
        raise UsageError(f"{path}: key 'configs' must be a list")
    out = []
    for index, item in enumerate(items):
        where = f"{path}: configs[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("workload"), dict) \
                or not isinstance(item.get("params"), dict):
            raise UsageError(f"{where} needs a 'workload' and a 'params' object")
        try:
            workload = workload_from_dict(item["workload"])
            space = _context(data["target"], workload.dtype.name, workload.shape,
                             workload.b_layout).space
            missing = [name for name in space.params() if name not in item["params"]]
            if missing:
                raise UsageError(f"params lack {', '.join(missing)}")
            out.append((workload, space.parse(item["params"])))
        except (KeyError, TypeError, ValueError, DseError) as exc:
            raise UsageError(f"{where}: {exc}") from None
    return out


def _rule_smem(target: str, w: Any, params: dict[str, Any], loads: str) -> int:
    """Shared memory the space's rule charges the config, loaded as the job says."""
    from search_spaces.triton_gemm.rules import smem_bytes

    ctx = _context(target, w.dtype.name, w.shape, w.b_layout)
    batch = ctx.space.encode([params])
    return int(smem_bytes(batch, w.dtype.in_bytes, ctx.target.device, loads == "tma")[0])


def cmd_compile(args: argparse.Namespace) -> int:
    """``dse triton compile``: compile each config of a triton configs file for the target's
    architecture; prints status, shared memory against the rule, registers and spills (or
    JSON); 1 unless every config compiles."""
    from dse.core import load_target, table
    from evaluators.hardware.triton_compile import compile_many
    from evaluators.hardware.triton_gpu import job_of
    from search_spaces.triton_gemm.target import GpuTarget

    if importlib.util.find_spec("triton") is None:
        raise UsageError("Triton is not installed: pip install triton (no GPU needed to "
                         "compile)")
    data = _read_configs(args.configs)
    target = load_target(data["target"])
    if not isinstance(target, GpuTarget):
        raise UsageError(f"target {data['target']!r} is not a GPU target")
    arch = args.arch or target.device.compute_capability
    items = _checked_items(args.configs, data)
    loads = (data["evaluator"].get("options") or {}).get("loads", "tma")  # as exported
    jobs = [job_of(params, _context(data["target"], w.dtype.name, w.shape, w.b_layout),
                   loads=loads) for w, params in items]

    terminal = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if terminal:  # one line, rewritten
            print(f"\rcompiled {done}/{total} for sm_{arch}", end="", file=sys.stderr,
                  flush=True)
        elif done % 10 == 0 or done == total:  # a log: a line now and then
            print(f"compiled {done}/{total} for sm_{arch}", file=sys.stderr, flush=True)

    results = compile_many(jobs, arch, args.workers, progress)
    if terminal:
        print(file=sys.stderr)
    limit = target.device.smem_per_block_bytes
    rows = []
    for (workload, params), job, result in zip(items, jobs, results, strict=True):
        shared = result.get("shared_bytes")
        rows.append({
            "shape": workload.shape,
            "config": " ".join(f"{k}={v}" for k, v in params.items()),
            "status": result["status"] if shared is None or shared <= limit
            else "over shared memory",
            "shared_B": shared,
            "rule_B": _rule_smem(data["target"], workload, params, job["loads"]),
            "registers": result.get("registers"), "tma": result.get("tma"),
            "spill_B": result.get("spill_bytes"), "seconds": round(result["seconds"], 2),
            "reason": _short(result.get("reason"))})
    if args.json:
        print(json.dumps({"arch": arch, "results": rows}, indent=1))
    else:
        print(table(rows, ("shape", "config", "status", "shared_B", "rule_B", "registers",
                           "spill_B", "tma", "seconds")))
        _print_summary(rows, arch)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def _short(reason: str | None) -> str | None:
    """The line of a compiler message that says what went wrong."""
    if not reason:
        return None
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    fatal = [line for line in lines if "fatal" in line or "error" in line.lower()]
    return (fatal or lines)[0][:300]


def _print_summary(rows: list[dict[str, Any]], arch: int) -> None:
    ok = [r for r in rows if r["status"] == "ok"]
    print(f"\n{len(ok)} of {len(rows)} configs compile for sm_{arch}; "
          f"{sum(bool(r['spill_B']) for r in ok)} spill registers; Triton's shared memory "
          f"equals the rule's for {sum(r['shared_B'] == r['rule_B'] for r in ok)} of {len(ok)}")
    for r in rows:
        if r["status"] != "ok":
            print(f"  {r['shape']} {r['config']}: {r['status']}: {r['reason'] or ''}")


def add_commands(sub: Any) -> None:
    """``dse triton`` and its subcommands."""
    triton = sub.add_parser("triton", help="the Triton GEMM of the GPU targets")
    commands = triton.add_subparsers(dest="triton_command", required=True)
    co = commands.add_parser("compile", help="compile exported configs for the GPU's "
                             "architecture here (no GPU needed): errors, shared memory, "
                             "registers, spills")
    co.add_argument("configs", metavar="CONFIGS.json",
                    help="written by dse run --offline or dse export-configs --evaluator triton")
    co.add_argument("--arch", type=positive_int, help="compute capability, e.g. 90 (default: the "
                    "target's)")
    co.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                    help="compiles at a time")
    co.add_argument("--json", action="store_true")
    co.set_defaults(func=cmd_compile)
