"""dse's systolic exhaustive search against ZigZag on the same GEMM and array: speed side by side.

Run:
    python benchmarks/zigzag_side_by_side.py [--zigzag-python PATH] [--shape 1024x1024x1024]
    python benchmarks/zigzag_side_by_side.py --setup      # first make .zigzag-venv (pip)

ZigZag runs in a subprocess with its own interpreter (``--zigzag-python``, else
``$DSE_ZIGZAG_PYTHON``, else ``.zigzag-venv/bin/python`` under the repository root, which
``--setup`` creates with ``python -m venv`` and ``pip install zigzag-dse six``): this same file,
run there with ``--zigzag-driver``, writes one GEMM layer (``O[b][k] += I[b][c] * W[c][k]``, B=M,
C=K, K=N; 8-bit I/W, 16-bit partial sums) as a workload yaml in a temporary folder and calls
``zigzag.api.get_hardware_performance_zigzag`` on ZigZag's own ``tpu_like`` example hardware
and mapping (a 32x32 weight-stationary array: spatial mapping K 32 x C 32; LOMA searches the
loop orders of the temporal mapping, ``lpf_limit`` 6). Its rate is the CostModelEvaluations it
builds (counted by wrapping its CostModelStage, one per temporal mapping) over the time spent in
its temporal-mapping stage (LOMA and the cost model; the whole call, parsing and saving
included, is printed beside it), best of ``--zigzag-repeats``.

dse searches the same GEMM on the shipped ``edge-npu`` systolic target (32x32, as tpu_like; when
ZigZag's array differs, a copy with its rows and columns): the analytical model's exhaustive
search over tile sizes x dataflow x loop order x double buffering, best of ``--repeats``. Its
rate is counted three ways (the parameter box, the configs generated, the feasible ones scored);
the figure is the feasible ones, the count comparable to ZigZag's evaluated mappings, printed
through ``goals.against_goal`` with ZigZag's rate as the goal (above 1x: dse is faster). The
best latency and utilisation (MACs / (PEs x cycles)) each tool finds are printed, dse's also
with the dataflow held to ws as ZigZag's mapping has it. Exit status 1 when a side returns
nothing or an impossible answer (no mappings, latency at or below zero or under the
compute bound), 2 without a ZigZag interpreter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from peer_venv import peer_or_none

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = ROOT / ".zigzag-venv"
DSE_TARGET = "edge-npu"
DSE_DTYPE = "int8-int8"   # ZigZag's layer: 8-bit operands and final outputs


# -- the ZigZag side: runs under ZigZag's interpreter, imports nothing of dse -------------------
def zigzag_driver(shape: tuple[int, int, int], repeats: int, out: Path) -> None:
    """Run ZigZag ``repeats`` times on the GEMM ``shape`` (M, K, N) and write what it found."""
    import logging
    from importlib.metadata import version

    import yaml
    import zigzag
    import zigzag.api as api
    from zigzag.stages.evaluation.cost_model_evaluation import CostModelStage
    from zigzag.stages.mapping.temporal_mapping_generator_stage import (
        TemporalMappingGeneratorStage,
    )

    logging.basicConfig(level=logging.ERROR)  # api's own basicConfig(INFO) is then a no-op
    counts = {"cmes": 0, "search_s": 0.0}

    class CountingCostModelStage(CostModelStage):
        def run(self) -> Iterator[Any]:
            counts["cmes"] += 1
            yield from super().run()

    class TimedTemporalMappingStage(TemporalMappingGeneratorStage):
        def run(self) -> Iterator[Any]:
            inner = super().run()
            while True:
                start = time.perf_counter()
                try:
                    item = next(inner)
                except StopIteration:
                    counts["search_s"] += time.perf_counter() - start
                    return
                counts["search_s"] += time.perf_counter() - start
                yield item

    api.CostModelStage = CountingCostModelStage  # type: ignore[misc]
    api.TemporalMappingGeneratorStage = TimedTemporalMappingStage  # type: ignore[misc]
    inputs = Path(zigzag.__file__).parent / "inputs"
    hardware, mapping = inputs / "hardware" / "tpu_like.yaml", inputs / "mapping" / "tpu_like.yaml"
    sizes = yaml.safe_load(hardware.read_text())["operational_array"]["sizes"]
    m, k, n = shape
    layer = [{"id": 0, "name": "gemm", "operator_type": "Gemm",
              "equation": "O[b][k]+=I[b][c]*W[c][k]", "loop_dims": ["B", "C", "K"],
              "loop_sizes": [m, k, n],
              "operand_precision": {"I": 8, "W": 8, "O": 16, "O_final": 8},
              "operand_source": {"I": 0}}]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "gemm.yaml"
        workload.write_text(yaml.safe_dump(layer))
        for i in range(repeats):
            counts.update(cmes=0, search_s=0.0)
            start = time.perf_counter()
            _, latency, cmes = api.get_hardware_performance_zigzag(
                str(workload), str(hardware), str(mapping), opt="latency",
                dump_folder=f"{tmp}/out{i}", loma_show_progress_bar=False)
            wall = time.perf_counter() - start
            best = cmes[0][1][0][0]
            runs.append({"wall_s": wall, "search_s": counts["search_s"], "cmes": counts["cmes"],
                         "latency_cycles": float(latency),
                         "ideal_cycles": float(best.ideal_cycle),
                         "spatial_mapping": str(best.spatial_mapping)})
    out.write_text(json.dumps({"version": version("zigzag-dse"), "array": sizes,
                               "runs": runs}))


def run_zigzag(python: Path, shape: tuple[int, int, int], repeats: int) -> dict[str, Any]:
    """ZigZag's report from its own interpreter; exits 1 with its stderr when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "zigzag.json"
        done = subprocess.run([str(python), __file__, "--zigzag-driver", str(out), "--shape",
                               "x".join(map(str, shape)), "--zigzag-repeats", str(repeats)],
                              capture_output=True, text=True)
        if done.returncode or not out.exists():
            sys.exit(f"FAILED: ZigZag ({python}) exited {done.returncode}:\n"
                     f"{done.stderr[-3000:]}")
        return json.loads(out.read_text())


# -- the dse side -------------------------------------------------------------------------------
def dse_search(shape: str, rows: int, cols: int, repeats: int) -> dict[str, Any]:
    """Best-of-``repeats`` exhaustive search on the systolic target with a rows x cols array,
    and the best configs (all dataflows, and ws alone)."""
    import dataclasses

    sys.path.insert(0, str(ROOT))
    from dse.core.evaluator import EvalContext
    from dse.core.registry import build_context, build_evaluator
    from dse.study.strategies.search import exhaustive

    ctx = build_context(DSE_TARGET, DSE_DTYPE, shape)
    array = ctx.target.array  # type: ignore[attr-defined]
    if (array.rows, array.cols) != (rows, cols):
        target = dataclasses.replace(ctx.target.with_values(array={"rows": rows, "cols": cols}),
                                     name=f"{DSE_TARGET}-{rows}x{cols}")
        ctx = EvalContext(target=target, workload=ctx.workload,
                          space=type(ctx.space)(target, ctx.workload))  # type: ignore[call-arg]
    analytical = build_evaluator("analytical")
    best_s, outcome = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        outcome = exhaustive(analytical, ctx, top=1)
        best_s = min(best_s, time.perf_counter() - start)
    assert outcome is not None
    ws = exhaustive(analytical, ctx, fix={"dataflow": "ws"}, top=1)
    return {"target": ctx.target.name, "seconds": best_s, "box": outcome.n_total,
            "generated": outcome.n_evaluated, "feasible": outcome.n_feasible,
            "best": outcome.top[0] if outcome.top else None,
            "best_ws": ws.top[0] if ws.top else None, "pes": rows * cols}


def check(side: str, count: int, cycles: float, ideal: float) -> None:
    """Exit 1 when ``side`` evaluated nothing or its best latency is impossible."""
    if count <= 0 or not cycles > 0 or cycles < ideal:
        sys.exit(f"FAILED: {side} returned {count} mappings and a best latency of {cycles} "
                 f"cycles (the compute bound is {ideal:,.0f})")


def main(argv: list[str] | None = None) -> int:
    """Run both searches, print their rates, ratio, best answers and the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zigzag-python", help="interpreter with zigzag-dse installed")
    parser.add_argument("--setup", action="store_true",
                        help=f"create {DEFAULT_VENV.name} with ZigZag first (pip)")
    parser.add_argument("--shape", default="1024x1024x1024", help="GEMM MxKxN")
    parser.add_argument("--repeats", type=int, default=5, help="dse searches (best of)")
    parser.add_argument("--zigzag-repeats", type=int, default=2, help="ZigZag runs (best of)")
    parser.add_argument("--zigzag-driver", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    m, k, n = (int(v) for v in args.shape.lower().split("x"))
    if args.zigzag_driver:
        zigzag_driver((m, k, n), args.zigzag_repeats, args.zigzag_driver)
        return 0
    python = peer_or_none("ZigZag", args.zigzag_python, "--zigzag-python", "DSE_ZIGZAG_PYTHON",
                          DEFAULT_VENV.name, ("zigzag-dse", "six"), args.setup, "zigzag.api")
    if python is None:
        return 2

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from goals import against_goal

    zz = run_zigzag(python, (m, k, n), args.zigzag_repeats)
    rows, cols = zz["array"]
    run = min(zz["runs"], key=lambda r: r["search_s"])
    macs, pes = m * k * n, rows * cols
    check("ZigZag", run["cmes"], run["latency_cycles"], macs / pes)
    zz_rate = run["cmes"] / run["search_s"]
    ours = dse_search(args.shape, rows, cols, args.repeats)
    best = ours["best"]
    check("dse", ours["feasible"], best.metrics["total_cycles"] if best else 0, macs / pes)
    feasible_rate = ours["feasible"] / ours["seconds"]

    print(f"GEMM {m}x{k}x{n} (MxKxN) on a {rows}x{cols} array")
    print(f"ZigZag {zz['version']} tpu_like: searches the temporal mappings (LOMA loop orders, "
          f"lpf_limit 6) of one spatial mapping {run['spatial_mapping']}; memories fixed")
    print(f"  {run['cmes']:,} mappings evaluated in {run['search_s']:.2f} s of search "
          f"({run['wall_s']:.2f} s the whole call; best of {len(zz['runs'])}): "
          f"{zz_rate:,.0f} mappings/s ({run['cmes'] / run['wall_s']:,.0f}/s over the call)")
    print(f"  best: {run['latency_cycles']:,.0f} cycles, utilisation "
          f"{macs / pes / run['latency_cycles']:.3f} (ZigZag's ideal {run['ideal_cycles']:,.0f})")
    print(f"dse {ours['target']}: searches tile sizes (t_m, t_k, t_n) x dataflow (os/ws/is) x "
          "loop order x buffer counts; SRAM sizes the target's")
    print(f"  box {ours['box']:,}, generated {ours['generated']:,}, feasible "
          f"{ours['feasible']:,} in {ours['seconds'] * 1e3:.1f} ms (best of {args.repeats}): "
          f"{ours['box'] / ours['seconds'] / 1e6:.2f} M box / "
          f"{ours['generated'] / ours['seconds'] / 1e6:.2f} M generated / "
          f"{feasible_rate / 1e6:.2f} M feasible configs/s")
    for label, cand in (("best", best), ("best ws", ours["best_ws"])):
        if cand is not None:
            cycles = cand.metrics["total_cycles"]
            shown = {key: cand.params[key] for key in ("t_m", "t_k", "t_n", "dataflow",
                                                       "loop_order")}
            print(f"  {label}: {cycles:,.0f} cycles, utilisation {macs / pes / cycles:.3f} "
                  f"({shown})")
    print(f"dse feasible configs/s / ZigZag mappings/s: {feasible_rate / zz_rate:,.0f}x")
    against_goal(f"dse systolic exhaustive vs ZigZag LOMA, {args.shape} on {rows}x{cols}",
                 feasible_rate, zz_rate, "configs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
