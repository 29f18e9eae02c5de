"""``dse systolic scalesim``: SCALE-Sim users' own files (a ``.cfg`` and a GEMM topology CSV),
simulated by dse's fold-schedule engine, with SCALE-Sim's report fields per layer.

The same numbers SCALE-Sim 3.0 reports for those files (cycles exactly; see
``docs/families/systolic.md`` for the agreement), in milliseconds instead of minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from dse.core.formatting import table

SHORT = {"total_cycles": "total", "compute_cycles": "compute", "stall_cycles": "stall",
         "overall_util_pct": "util %", "mapping_eff_pct": "mapping %",
         "dram_ifmap_reads": "DRAM A rd", "dram_filter_reads": "DRAM B rd",
         "dram_ofmap_writes": "DRAM C wr"}


def cmd_scalesim(args: argparse.Namespace) -> int:
    """Simulate every layer of the topology on the config's array."""
    from evaluators.systolic_sim.fold_schedule import simulate_gemm
    from evaluators.systolic_sim.scalesim_files import read_gemm_topology, read_scalesim_config

    run_name, setup = read_scalesim_config(args.config)
    layers = read_gemm_topology(args.topology)
    rows: list[dict[str, Any]] = []
    for layer, m, n, k in layers:
        start = time.perf_counter()
        report = simulate_gemm(setup, m, n, k)
        rows.append({"layer": layer, "M": m, "N": n, "K": k, **report.to_dict(),
                     "sim_s": time.perf_counter() - start})
    if args.json:
        print(json.dumps({"run_name": run_name, "config": dataclasses.asdict(setup),
                          "layers": rows}, indent=1))
        return 0
    print(f"{run_name}: {setup.rows}x{setup.cols} array, {setup.dataflow}, SRAM "
          f"{setup.ifmap_sram_kb:g}/{setup.filter_sram_kb:g}/{setup.ofmap_sram_kb:g} KiB "
          f"(ifmap/filter/ofmap), interface bandwidth {setup.bandwidth}"
          + (f" {setup.user_bandwidth:g} words/cycle" if setup.bandwidth == "USER" else ""))
    shown = [{"layer": r["layer"], "MxNxK": f"{r['M']}x{r['N']}x{r['K']}",
              **{SHORT[f]: r[f] for f in SHORT}} for r in rows]
    print(table(shown, ["layer", "MxNxK", *SHORT.values()]))
    return 0


def add_commands(sub: Any) -> None:
    """``dse systolic`` and its subcommands."""
    systolic = sub.add_parser("systolic", help="systolic arrays: SCALE-Sim's files simulated")
    commands = systolic.add_subparsers(dest="systolic_command", required=True)
    sc = commands.add_parser(
        "scalesim", help="simulate a SCALE-Sim config and GEMM topology, printing SCALE-Sim's "
        "report fields per layer")
    sc.add_argument("-c", "--config", required=True, help="SCALE-Sim .cfg file")
    sc.add_argument("-t", "--topology", required=True,
                    help="SCALE-Sim GEMM topology CSV (Layer, M, N, K,)")
    sc.add_argument("--json", action="store_true", help="every report field, as JSON")
    sc.set_defaults(func=cmd_scalesim)
