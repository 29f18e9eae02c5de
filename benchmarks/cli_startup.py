"""How fast ``dse --help`` and a refusal of bad input answer, against the bare interpreter.

Run: python benchmarks/cli_startup.py [--repeats 5]

Each command runs in a fresh ``python -X importtime`` process: its wall time (best of the
repeats) and its imports' time are printed beside the same of ``python -c pass`` (the baseline,
measured in the same run), with the ratio, the heavy libraries the command loaded (there should
be none for --help) and the verdict against the target: under 0.5 s each. The benchmark fails
when a command answers wrongly (no list of commands, no message naming the missing file).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass

TARGET_S = 0.5
HEAVY = ("numpy", "pandas", "sqlalchemy", "optuna", "ray", "plotly", "scipy", "torch")
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


@dataclass
class Run:
    """One command's best wall time, its imports' total time and the modules it loaded."""

    wall_s: float
    imports_s: float
    modules: set[str]
    returncode: int
    stdout: str
    stderr: str


def measure(args: list[str], repeats: int) -> Run:
    """The best of ``repeats`` fresh ``python -X importtime`` runs of ``args``."""
    best: Run | None = None
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True,
                              text=True)
        wall = time.perf_counter() - start
        modules, total_us = set(), 0
        lines = []
        for line in done.stderr.splitlines():
            match = IMPORT_LINE.match(line)
            if not match:
                lines.append(line)
                continue
            modules.add(match.group(4))
            if not match.group(3):  # a top-level import: its cumulative time counts once
                total_us += int(match.group(2))
        run = Run(wall, total_us / 1e6, modules, done.returncode, done.stdout, "\n".join(lines))
        if best is None or run.wall_s < best.wall_s:
            best = run
    assert best is not None
    return best


def main() -> None:
    """Time the baseline, ``dse --help`` and a refused ``dse run``; print ratios and verdicts,
    and fail when a command answers wrongly."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    baseline = measure(["-c", "pass"], args.repeats)
    print(f"python -c pass: {baseline.wall_s * 1e3:.0f} ms wall, imports "
          f"{baseline.imports_s * 1e3:.0f} ms")
    commands = {"dse --help": ["-m", "dse.cli", "--help"],
                "dse run missing.yaml": ["-m", "dse.cli", "run", "missing.yaml"]}
    failures = []
    for label, command in commands.items():
        run = measure(command, args.repeats)
        heavy = sorted(m for m in HEAVY if m in run.modules)
        verdict = "met" if run.wall_s < TARGET_S else "NOT met"
        print(f"{label}: {run.wall_s * 1e3:.0f} ms wall ({run.wall_s / baseline.wall_s:.1f}x the "
              f"bare interpreter), imports {run.imports_s * 1e3:.0f} ms; heavy libraries "
              f"loaded: {', '.join(heavy) or 'none'}; target < {TARGET_S} s: {verdict}")
        if label == "dse --help" and (run.returncode != 0 or "run or resume a study"
                                      not in run.stdout or heavy):
            failures.append(f"{label} answered wrongly (exit {run.returncode}, heavy: {heavy})")
        if label.startswith("dse run") and (run.returncode != 2
                                            or "missing.yaml' does not exist" not in run.stderr):
            failures.append(f"{label} did not refuse the missing file: {run.stderr[-300:]}")
    if failures:
        raise SystemExit("; ".join(failures))


if __name__ == "__main__":
    main()
