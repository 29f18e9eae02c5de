"""The analytical evaluator's version names what it reports. Stored results are served by
(target, workload, config, evaluator name and version), so a change to a space's rules or model
that alters results under the same version would have results of the old code served as
current. Each version's results on a fixed sample of every space's configs are fingerprinted
in ``tests/data/analytical_fingerprints.json``: a change that alters them fails here until the
evaluator gets a new version and its fingerprints are recorded with
``.venv/bin/python -m tests.test_model_versions --update``. The event simulator's results are
fingerprinted the same way, on a smaller sample of the XDNA spaces, in
``tests/data/simulator_fingerprints.json``."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dse.core.params import batch_len, batch_take
from dse.core.registry import analytical_spaces, build_context, target_path
from evaluators.analytical import AnalyticalEvaluator
from evaluators.simulator import SimulatorEvaluator

FINGERPRINTS = Path(__file__).with_name("data") / "analytical_fingerprints.json"
SIM_FINGERPRINTS = Path(__file__).with_name("data") / "simulator_fingerprints.json"
SAMPLE = 400  # configs a case evaluates, spread evenly over its space's box
SIM_SAMPLE = 24  # the simulator's (tens of ms a config)
# (target, dtype, shape): every space the evaluator scores, at a shape with infeasible and
# feasible configs; the cpu target gets fixed cache sizes (it reads 0s from the machine)
CASES = {"xdna": ("xdna", "int8-int8", "1024x1024x1024"),
         "xdna2": ("xdna2", "bf16-bf16", "2048x2048x2048"),
         # a row-major B: what XDNA2's read merge moves (an optional fourth item: B's layout)
         "xdna2-row-b": ("xdna2", "int8-int16", "2048x2048x2048", "row"),
         "ascend-950pr": ("ascend-950pr", "bf16-bf16", "4x1024x1024x1024"),
         "h200": ("h200", "bf16-bf16", "4096x4096x4096"),
         "h200-decode": ("h200", "bf16-bf16", "64x4096x4096"),
         "h200-unaligned": ("h200", "fp16-fp16", "1000x1004x1000"),
         "cpu": ("cpu", "fp32-fp32", "256x256x256"),
         "cpu-amx": ("cpu-amx", "int8-int32", "256x256x256"),
         "cpu-amx-decode": ("cpu-amx", "bf16-fp32", "8x512x512"),
         "tpu-v1": ("tpu-v1", "int8-int32", "1024x1024x1024"),
         "edge-npu-mix": ("edge-npu", "int8-int8", "1x2048x2048*4,256x2304x196")}
SIM_CASES = ("xdna", "xdna2", "xdna2-row-b")
CPU_CACHES = {"l1_bytes": 49152, "l2_bytes": 2097152, "l3_bytes": 33554432}


def _cpu_target_file(folder: Path, target: str = "cpu") -> str:
    """The host-CPU target with the sizes it reads from the system fixed (the same on every
    machine)."""
    text = target_path(target).read_text().replace("cores = 0", "cores = 2")
    for name, size in CPU_CACHES.items():
        text = text.replace(f"{name} = 0", f"{name} = {size}")
    path = folder / f"{target}-fixed.toml"
    path.write_text(text)
    return str(path)


def _value(v: Any) -> Any:
    """Floats to 6 significant digits: the fingerprint is of what the model says, not of the
    last bits a machine's maths library rounds differently."""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def fingerprint(case: str, evaluator: Any = None, sample: int = SAMPLE) -> str:
    """A digest of the evaluator's results (status, reason, metrics) on the case's sample
    (the analytical evaluator unless another is given)."""
    evaluator = evaluator or AnalyticalEvaluator()
    target, dtype, shape, *layout = CASES[case]
    with tempfile.TemporaryDirectory() as folder:
        if target in ("cpu", "cpu-amx"):
            target = _cpu_target_file(Path(folder), target)
        ctx = build_context(target, dtype, shape, *layout)
        batch, _ = ctx.space.enumerate()
        n = batch_len(batch)
        picked = np.unique(np.linspace(0, n - 1, min(sample, n)).astype(np.int64))
        results = evaluator.evaluate(batch_take(batch, picked), ctx)
    rows = [[r.status.value, r.reason, sorted((k, _value(v)) for k, v in r.metrics.items())]
            for r in results]
    assert any(r.ok for r in results), case  # the sample holds scored configs
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def test_every_space_the_evaluator_scores_has_a_case():
    spaces = {build_context(*case).space.name for case in CASES.values()}
    assert spaces == set(analytical_spaces())


def _check(evaluator: Any, path: Path, case: str, digest: str) -> None:
    """The case's digest is the one recorded for the evaluator's version."""
    version, name = evaluator.version, evaluator.name
    recorded = json.loads(path.read_text())
    assert version in recorded, (
        f"{name} version {version} has no fingerprints: record them with "
        ".venv/bin/python -m tests.test_model_versions --update")
    assert digest == recorded[version][case], (
        f"the {name} evaluator's results for {case} changed under version {version}: results "
        f"stored by the old code would be served as current. Give {type(evaluator).__name__} "
        "a new version (say why beside it) and record its fingerprints with "
        ".venv/bin/python -m tests.test_model_versions --update")


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_change_only_with_the_version(case):
    _check(AnalyticalEvaluator(), FINGERPRINTS, case, fingerprint(case))


def sim_fingerprint(case: str) -> str:
    """The simulator's digest of the case (a smaller sample)."""
    return fingerprint(case, SimulatorEvaluator(), SIM_SAMPLE)


@pytest.mark.parametrize("case", SIM_CASES)
def test_simulator_results_change_only_with_its_version(case):
    _check(SimulatorEvaluator(), SIM_FINGERPRINTS, case, sim_fingerprint(case))


def _record(path: Path, version: str, digests: dict[str, str]) -> None:
    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded[version] = digests
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded version {version} in {path}")


def _update() -> None:
    _record(FINGERPRINTS, AnalyticalEvaluator.version,
            {case: fingerprint(case) for case in sorted(CASES)})
    _record(SIM_FINGERPRINTS, SimulatorEvaluator.version,
            {case: sim_fingerprint(case) for case in SIM_CASES})


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.test_model_versions --update")
    _update()
