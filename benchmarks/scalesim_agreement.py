"""The fold-schedule simulator against real SCALE-Sim 3.0: agreement and speed.

Run:
    python benchmarks/scalesim_agreement.py [--scalesim-python PATH]
    python benchmarks/scalesim_agreement.py --setup      # first make .scalesim-venv (pip)

SCALE-Sim runs in a subprocess with its own interpreter (``--scalesim-python``, else
``$DSE_SCALESIM_PYTHON``, else ``.scalesim-venv/bin/python`` under the repository root, which
``--setup`` creates with ``python -m venv`` and ``pip install scalesim==3.0.0 'numpy<2.4'``),
through ``tests/fixtures/scalesim/make_fixtures.py --run``. Each case is simulated by both, and
every report field compared: integers (cycles, stalls, SRAM/DRAM access counts, start/stop
cycles) must be equal, floats equal to 1e-12. Then our simulator alone is timed on a 1024^3 GEMM
on a 32x32 array (target: < 0.5 s, CALC bandwidth, SCALE-Sim's example 64 kB SRAMs; SCALE-Sim
took 553 s on it here) and on 4096^3 on 128x128. Exit status 1 when a case disagrees or the
1024^3 target is missed, 2 without a SCALE-Sim interpreter.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peer_venv import peer_or_none

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.systolic_sim.fold_schedule import ArraySetup, simulate_gemm  # noqa: E402
from tests.fixtures.scalesim.make_fixtures import case_dicts  # noqa: E402

DRIVER = ROOT / "tests" / "fixtures" / "scalesim" / "make_fixtures.py"
DEFAULT_VENV = ROOT / ".scalesim-venv"
TARGET_S = 0.5

# Small enough for SCALE-Sim to run in seconds; none is a fixture case. (name, rows, cols,
# dataflow, ifmap kB, filter kB, ofmap kB, bandwidth mode, user bw, m, n, k), as the fixtures'
CASES = case_dicts([
    ("os_32x32_calc_64k", 32, 32, "os", 64, 64, 64, "CALC", None, 128, 128, 128),
    ("ws_32x32_calc_64k", 32, 32, "ws", 64, 64, 64, "CALC", None, 128, 128, 128),
    ("is_32x32_calc_64k", 32, 32, "is", 64, 64, 64, "CALC", None, 128, 128, 128),
    ("os_8x8_calc_2k", 8, 8, "os", 2, 2, 1, "CALC", None, 100, 60, 90),
    ("ws_16x8_calc_1k", 16, 8, "ws", 1, 1, 1, "CALC", None, 70, 90, 60),
    ("is_8x16_calc_1k", 8, 16, "is", 1, 1, 1, "CALC", None, 90, 40, 75),
    ("os_32x32_user10", 32, 32, "os", 8, 8, 4, "USER", 10, 96, 128, 64),
    ("ws_16x16_user4", 16, 16, "ws", 2, 2, 1, "USER", 4, 64, 80, 48),
    ("is_16x16_user2", 16, 16, "is", 2, 2, 1, "USER", 2, 64, 80, 48),
    ("os_4x4_user1_decode", 4, 4, "os", 1, 1, 1, "USER", 1, 1, 256, 128),
    ("ws_8x32_user16_decode", 8, 32, "ws", 1, 4, 1, "USER", 16, 1, 200, 160),
    ("is_32x8_user3", 32, 8, "is", 1, 1, 2, "USER", 3, 50, 33, 100),
])


def setup_of(case: dict) -> ArraySetup:
    """The case's array setup."""
    return ArraySetup(case["rows"], case["cols"], case["dataflow"], case["ifmap_sram_kb"],
                      case["filter_sram_kb"], case["ofmap_sram_kb"], case["bandwidth"],
                      case["user_bandwidth"])


def run_scalesim(python: Path, cases: list[dict]) -> tuple[list[dict], float]:
    """SCALE-Sim's results on ``cases`` and the subprocess's wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        cases_json, out_json = Path(tmp) / "cases.json", Path(tmp) / "out.json"
        cases_json.write_text(json.dumps(cases))
        start = time.perf_counter()
        subprocess.run([str(python), str(DRIVER), "--run", str(cases_json), "--out",
                        str(out_json)], check=True, stderr=subprocess.DEVNULL)
        return json.loads(out_json.read_text()), time.perf_counter() - start


def disagreements(ours: dict, theirs: dict) -> list[str]:
    """The fields where the two reports differ."""
    wrong = []
    for key, value in theirs.items():
        same = math.isclose(ours[key], value, rel_tol=1e-12, abs_tol=1e-12) \
            if isinstance(value, float) else ours[key] == value
        if not same:
            wrong.append(f"{key} {ours[key]} vs {value}")
    return wrong


def timed(setup: ArraySetup, m: int, n: int, k: int, repeat: int = 3):
    """Best of ``repeat`` wall times of one simulation, and its report."""
    best, report = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        report = simulate_gemm(setup, m, n, k)
        best = min(best, time.perf_counter() - start)
    return best, report


def main(argv: list[str] | None = None) -> int:
    """Compare with SCALE-Sim, time the big GEMMs, and say whether the targets are met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalesim-python", help="interpreter with scalesim 3.0 installed")
    parser.add_argument("--setup", action="store_true",
                        help=f"create {DEFAULT_VENV.name} with SCALE-Sim first (pip)")
    args = parser.parse_args(argv)
    python = peer_or_none("SCALE-Sim 3.0", args.scalesim_python, "--scalesim-python",
                          "DSE_SCALESIM_PYTHON", DEFAULT_VENV.name,
                          ("scalesim==3.0.0", "numpy<2.4"), args.setup, "scalesim.scale_sim")
    if python is None:
        return 2

    results, wall = run_scalesim(python, CASES)
    failures = 0
    ours_total = theirs_total = 0.0
    header = (f"{'case':24} {'ours total/compute/stall':>26} {'SCALE-Sim':>26} "
              f"{'diff':>6} {'DRAM r/w':>8} {'ours ms':>8} {'SCALE-Sim s':>11}")
    print(header)
    print("-" * len(header))
    for result in results:
        case, theirs = result["case"], result["scalesim"]
        seconds, report = timed(setup_of(case), case["m"], case["n"], case["k"])
        ours = report.to_dict()
        wrong = disagreements(ours, theirs)
        failures += bool(wrong)
        ours_total += seconds
        theirs_total += result["scalesim_seconds"]
        cyc = ("total_cycles", "compute_cycles", "stall_cycles")
        mine = "/".join(str(ours[c]) for c in cyc)
        ref = "/".join(str(theirs[c]) for c in cyc)
        diff = ours["total_cycles"] - theirs["total_cycles"]
        dram = all(ours[f] == theirs[f] for f in ("dram_ifmap_reads", "dram_filter_reads",
                                                  "dram_ofmap_writes"))
        print(f"{case['name']:24} {mine:>26} {ref:>26} {diff:>6} "
              f"{'equal' if dram else 'DIFFER':>8} {1e3 * seconds:8.2f} "
              f"{result['scalesim_seconds']:11.2f}")
        for line in wrong:
            print(f"    DISAGREES: {line}")
    print(f"\n{len(results) - failures}/{len(results)} cases agree on every field; "
          f"SCALE-Sim {theirs_total:.2f} s (subprocess {wall:.2f} s) vs ours "
          f"{ours_total:.4f} s: {theirs_total / ours_total:,.0f}x faster")

    print("\nour simulator alone (best of 3):")
    target_met = True
    for rows, size, kb in ((32, 1024, 64), (128, 4096, 1024)):
        for dataflow in ("os", "ws", "is"):
            for mode, bw in (("CALC", None), ("USER", 10)):
                setup = ArraySetup(rows, rows, dataflow, kb, kb, kb, mode, bw)
                seconds, report = timed(setup, size, size, size)
                note = ""
                if size == 1024:
                    ok = seconds < TARGET_S
                    target_met &= ok
                    note = f"  target < {TARGET_S} s: {'met' if ok else 'NOT MET'}"
                print(f"  {size}^3 on {rows}x{rows} {dataflow} {mode:4} {kb} kB: "
                      f"{seconds:.3f} s, {report.total_cycles:,} cycles{note}")
    if failures or not target_met:
        print(f"\nFAILED: {failures} case(s) disagree with SCALE-Sim"
              + ("" if target_met else f"; the 1024^3 target of {TARGET_S} s is missed"),
              file=sys.stderr)
        return 1
    print("\nall cases agree with SCALE-Sim and the 1024^3 target is met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
