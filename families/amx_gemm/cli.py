"""``dse amx probe``: the AMX engine of this machine measured (tile-multiply peak per dtype on
one core and on all, tile-load bandwidth from L1, L2, L3 and DRAM with every core streaming,
the cost of reading rows in short runs) and written as a target file, the shipped one's other
constants kept."""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path
from typing import Any

from dse.core.errors import UsageError


def cmd_probe(args: argparse.Namespace) -> int:
    """Probe the engine and write ``args.out`` (refused, saying why, without AMX)."""
    from dse.core.registry import shipped_targets
    from dse.core.target import rewrite_toml
    from evaluators.hardware.amx import DEVICE, worker_environment
    from evaluators.hardware.amx_detect import amx_problem, cpu_model
    from evaluators.hardware.amx_probe import (
        RUN_LONG,
        RUN_SHORT,
        load_bytes_per_s,
        peak_ops_per_s,
        run_knee_bytes,
    )
    from evaluators.hardware.harness import MeasureSettings, Worker
    from search_spaces.amx_gemm.target import OPS_PER_TDP, amx_target_from_dict, system_cores

    problem = amx_problem()
    if problem:
        raise UsageError(f"dse amx probe needs AMX: {problem}")
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists: choose another --out or add --force")
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} is not a folder")
    import tomllib

    shipped_file = shipped_targets()["cpu-amx"]  # the family's own target file
    shipped = amx_target_from_dict(tomllib.loads(shipped_file.read_text()), str(shipped_file))
    cores = args.cores or system_cores()
    settings = MeasureSettings(1, 3, args.repeats, 0.03, 120.0)
    worker = Worker(worker_environment())
    found: dict[str, float] = {}
    try:
        for dtype in ("int8-int32", "bf16-fp32"):
            for threads in sorted({1, cores}):
                ops = peak_ops_per_s(worker, DEVICE, threads, dtype, settings)
                if ops is None:
                    raise UsageError(f"the {dtype} peak probe failed on {threads} thread(s)")
                print(f"peak {dtype:<10} {threads} thread(s): {ops / 1e12:7.2f} TOPS", flush=True)
                if dtype == "int8-int32" and threads == 1:
                    found["engine.clock_hz"] = (ops * shipped.engine.tdp_cycles
                                                / OPS_PER_TDP["int8"])
        sizes = {"l1": shipped.caches.l1_bytes // 2, "l2": shipped.caches.l2_bytes // 2,
                 "l3": shipped.caches.l3_bytes // (2 * cores),
                 "dram": max(8 * shipped.caches.l3_bytes, 256 << 20) // cores}
        for level, size in sizes.items():
            rate = load_bytes_per_s(worker, DEVICE, size, cores, settings)
            if rate is None:
                raise UsageError(f"the {level} tile-load probe failed")
            found[f"bandwidth.{level}_bytes_per_s"] = rate
            print(f"tile loads from {level:<4} ({size / 1024:,.0f} KiB a core): "
                  f"{rate / 1e9:8.1f} GB/s a core", flush=True)
        knee = run_knee_bytes(worker, DEVICE, cores, settings)
        if knee is None:
            raise UsageError("the row-run probe failed")
        found["model.run_knee_bytes"] = knee[0]
        print(f"rows read in runs of {RUN_SHORT} bytes: {knee[1] / 1e9:.1f} GB/s, of "
              f"{RUN_LONG}: {knee[2] / 1e9:.1f} GB/s (knee {knee[0]:.0f} bytes)", flush=True)
    finally:
        worker.close()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"# Measured by `dse amx probe` on {cpu_model()} ({cores} cores, host "
              f"{os.uname().nodename}) at {stamp}:\n# engine.clock_hz (from the one-core int8 "
              "peak), the bandwidth section and model.run_knee_bytes are this machine's; the "
              "rest is the shipped file's.\n")
    text = rewrite_toml(shipped_file.read_text(), found)
    out.write_text(header + text)
    print(f"wrote {out}")
    return 0


def add_commands(sub: Any) -> None:
    """``dse amx`` and its subcommands."""
    from dse.core.commands import positive_int

    amx = sub.add_parser("amx", help="the host CPU's AMX engine (Intel Xeon): probes")
    commands = amx.add_subparsers(dest="amx_command", required=True)
    probe = commands.add_parser(
        "probe", help="measure this CPU's AMX peak, tile-load bandwidths and the cost of short "
        "row runs, and write a target file")
    probe.add_argument("--out", required=True, help="the target file to write (.toml)")
    probe.add_argument("--force", action="store_true", help="overwrite --out")
    probe.add_argument("--cores", type=positive_int, default=None,
                       help="threads of the all-core probes (default: every core)")
    probe.add_argument("--repeats", type=positive_int, default=7,
                       help="most timed runs of each probe (default 7)")
    probe.set_defaults(func=cmd_probe)
