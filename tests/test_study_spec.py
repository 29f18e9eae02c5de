"""Study files: a valid one becomes typed objects; each mistake is named with file and key."""

from __future__ import annotations

import os
import re
import textwrap

import pytest

from dse.core.registry import target_path
from dse.study.spec import StudyFileError, load_study

VALID = """
name: demo
target: xdna2
workloads:
  grid:
    shape: [4096x4096x4096, 2048x4096x2048]
    dtype: [int8-int8, bf16-bf16]
space:
  fix: {buf_c_l1: 1}
  free: [bd_scheme]
  range: {m_ct: [32, 256]}
  constraints: [dma_bound]
evaluator: {name: synthetic, options: {work_s: 0.0}}
sampler: {name: nsga2, options: {population_size: 20}}
objectives: [tops, {l1_bytes: minimize}]
budget: {trials: 50, time_s: 60}
workers: 2
seed: 3
"""


def write(tmp_path, text, name="study.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_valid_file(tmp_path):
    spec = load_study(write(tmp_path, VALID))
    assert spec.name == "demo" and len(spec.workloads) == 4
    assert {w.dtype.name for w in spec.workloads} == {"int8-int8", "bf16-bf16"}
    assert spec.space.fix == {"buf_c_l1": 1} and spec.space.free == ("bd_scheme",)
    assert spec.space.ranges == {"m_ct": (32, 256)}
    assert spec.evaluator.options == {"work_s": 0.0}
    assert [(o.metric, o.direction) for o in spec.objectives] == [
        ("tops", "maximize"), ("l1_bytes", "minimize")]
    assert (spec.budget.trials, spec.budget.time_s, spec.workers, spec.seed) == (50, 60.0, 2, 3)
    assert spec.with_overrides(trials=7).budget.trials == 7
    assert spec.identity() == spec.with_overrides(trials=7, workers=1).identity()


def test_defaults_and_relative_target_path(tmp_path):
    (tmp_path / "mine.toml").write_text(target_path("xdna").read_text())
    spec = load_study(write(tmp_path, """
        name: d
        target: mine.toml
        workload: {shape: 1024x1024x1024, dtype: int8-int16, b_layout: row}
        budget: {trials: 5}
    """))
    assert spec.target == str(tmp_path / "mine.toml")
    assert spec.sampler.name == "tpe" and spec.evaluator.name == "analytical"
    assert spec.objectives[0].metric == "tops" and spec.workloads[0].b_layout == "row"


def test_a_named_strategy_is_the_one_the_file_implies(tmp_path):
    # strategy: exhaustive is the older sampler: exhaustive, and a stored study of either
    # resumes under the other; a strategy the file names alone changes the identity
    base = "name: x\ntarget: xdna2\nworkload: {shape: 256x256x256, dtype: int8-int8}\n"
    named = load_study(write(tmp_path, base + "strategy: exhaustive\n", "a.yaml"))
    implied = load_study(write(tmp_path, base + "sampler: exhaustive\n", "b.yaml"))
    assert named.strategy.name == implied.strategy.name == "exhaustive"
    assert named.identity() == implied.identity() and "strategy" not in named.identity()
    tpe = load_study(write(tmp_path, base + "budget: {trials: 3}\n", "c.yaml"))
    assert tpe.strategy.name == "asktell" and "strategy" not in tpe.identity()


@pytest.mark.parametrize(("text", "pattern"), [
    ("name: [unclosed", r"not valid YAML"),
    ("name: x\ntarget: xdna2\nwork: {}\n", r"unknown key 'work'; allowed: name, target"),
    ("target: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\nbudget: {trials: 1}\n",
     r"key 'name': missing is not valid"),
    ("name: x\ntarget: xdna9\nworkload: {shape: 64x64x64, dtype: int8-int8}\n",
     r"key 'target': unknown target 'xdna9' \(did you mean 'xdna' or 'xdna2'\?\); valid: "
     r"ascend-950pr, cpu, cpu-amx, edge-npu, h100, h200, tpu-v1, tpu-v2, tpu-v3, tpu-v4, xdna, "
     r"xdna2"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64, dtype: int8-int8}\n",
     r"key 'workload': shape '64x64' is not of the form"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int4-int8}\n",
     r"key 'workload': unknown dtype"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\nsampler: tpee\n"
     "budget: {trials: 1}\n",
     r"key 'sampler.name': 'tpee' is not valid; allowed: cmaes, gp, nsga2, random, tpe"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "objectives: [speed]\nbudget: {trials: 1}\n", r"key 'objectives\[0\]': 'speed'"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "space: {fix: {m_tile: 4}}\nbudget: {trials: 1}\n", r"unknown key 'space.fix.m_tile'"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "space: {fix: {bd_scheme: fast}}\nbudget: {trials: 1}\n",
     r"key 'space.fix.bd_scheme'.*valid: overlapped, sequential"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "space: {range: {m_ct: [64, 32]}}\nbudget: {trials: 1}\n", r"key 'space.range.m_ct'"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n",
     r"key 'budget': give trials and/or time_s"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "budget: {trials: 0}\n", r"key 'budget.trials': 0 is not valid; expected an integer >= 1"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\nsampler: cmaes\n"
     "objectives: [tops, l1_bytes]\nbudget: {trials: 1}\n", r"cmaes optimises one objective"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "evaluator: oracle\nbudget: {trials: 1}\n", r"key 'evaluator.name'.*allowed: amx, analytical"),
    ("name: x\ntarget: xdna2\n", r"give exactly one of 'workload'"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "space: {constraints: [tight]}\nbudget: {trials: 1}\n",
     r"key 'space.constraints'.*valid: dma_bound"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\nstrategy: walk\n"
     "budget: {trials: 1}\n",
     r"key 'strategy.name': 'walk' is not valid; allowed: asktell, exhaustive, ladder"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\nstrategy: ladder\n",
     r"strategy 'ladder' runs a 'ladder': give its rungs"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "strategy: exhaustive\nsampler: tpe\n", r"key 'sampler': strategy 'exhaustive' asks no"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "strategy: {name: asktell, options: {depth: 2}}\nbudget: {trials: 1}\n",
     r"key 'strategy.options.depth': strategy 'asktell' takes no options"),
    ("name: x\ntarget: xdna2\nworkload: {shape: 64x64x64, dtype: int8-int8}\n"
     "strategy: asktell\nsampler: exhaustive\nbudget: {trials: 1}\n",
     r"strategy 'asktell' asks an Optuna sampler; 'exhaustive' is a strategy"),
])
def test_errors_name_the_file_and_key(tmp_path, text, pattern):
    path = write(tmp_path, text)
    with pytest.raises(StudyFileError) as err:
        load_study(path)
    message = str(err.value)
    assert str(path) in message and re.search(pattern, message), message


def test_missing_file():
    with pytest.raises(StudyFileError, match="does not exist"):
        load_study("/nonexistent/study.yaml")


def test_a_folder_device_or_fifo_is_not_called_missing(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, problem in ((tmp_path, "is a folder, not a study file"),
                          ("/dev/null", "is not a regular file (a device, FIFO or socket)"),
                          (fifo, "is not a regular file (a device, FIFO or socket)")):
        with pytest.raises(StudyFileError, match=re.escape(f"'{path}' {problem}")):
            load_study(path)
