"""Target files: shipped targets load, edited copies work, malformed files are named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dse.core.errors import TargetFileError, UsageError
from dse.core.registry import available_targets, load_target, target_path


def test_shipped_targets_load():
    assert {"xdna", "xdna2"} <= set(available_targets())
    xdna, xdna2 = load_target("xdna"), load_target("xdna2")
    assert (xdna.array.rows, xdna.array.cols, xdna.array.physical_cols) == (4, 4, 5)
    assert (xdna2.array.rows, xdna2.array.cols) == (4, 8)
    assert xdna.array.clock_hz == 1.0e9 and xdna2.array.clock_hz == 1.8e9
    assert xdna.input_spec("int8").peak_macs_per_cycle == 256
    assert xdna2.input_spec("int8").peak_macs_per_cycle == 512
    assert (xdna2.input_spec("bf16").r, xdna2.input_spec("bf16").convert_to_bfp16) == (8, True)
    assert xdna2.memory.l2_neighbour_sharing and not xdna.memory.l2_neighbour_sharing


def _copy(tmp_path: Path, edit) -> Path:
    text = target_path("xdna").read_text()
    path = tmp_path / "mine.toml"
    path.write_text(edit(text))
    return path


def test_edited_copy_is_a_what_if(tmp_path):
    path = _copy(tmp_path, lambda t: t.replace("l1_bytes = 65536", "l1_bytes = 131072"))
    mine = load_target(str(path))
    assert mine.memory.l1_bytes == 131072
    assert mine.digest() != load_target("xdna").digest()
    assert load_target(str(target_path("xdna"))).digest() == load_target("xdna").digest()


@pytest.mark.parametrize(("edit", "pattern"), [
    (lambda t: t.replace("l1_bytes = 65536\n", ""), r"missing key 'memory\.l1_bytes'"),
    (lambda t: t.replace("rows = 4", "rows = 4\nrowz = 3"), r"unknown key 'array\.rowz'.*valid:"),
    (lambda t: t.replace("clock_hz = 1.0e9", 'clock_hz = "fast"'),
     r"key 'array\.clock_hz': expected a finite number"),
    (lambda t: t.replace("clock_hz = 1.0e9", "clock_hz = nan"),
     r"key 'array\.clock_hz': expected a finite number, got nan"),
    (lambda t: t.replace("clock_hz = 1.0e9", "clock_hz = inf"),
     r"key 'array\.clock_hz': expected a finite number, got inf"),
    (lambda t: t.replace("shim_bds = 16", "shim_bds = -16"),
     r"key 'dma\.shim_bds': expected a positive number"),
    (lambda t: t.replace("shim_bds = 16", "shim_bds = 16.5"),
     r"key 'dma\.shim_bds': expected an integer"),
    (lambda t: t.replace("l2_neighbour_sharing = false", "l2_neighbour_sharing = 0"),
     r"expected true or false"),
    (lambda t: t.replace('"bf16-bf16"]', '"bf16-fp8"]'), r"key 'dtypes': unknown pair 'bf16-fp8'"),
    (lambda t: t.replace("mac_efficiency = 1.0", "mac_efficiency = 1.5"),
     r"inputs\.bf16\.mac_efficiency"),
    (lambda t: t.replace("[dram]", "[dram"), r"not valid TOML"),
    (lambda t: re.sub(r"\[inputs\.int16\][^\[]*", "", t), r"inputs\.int16'.*needed by dtype"),
    (lambda t: t.replace("cols = 4 ", "cols = 6 "), r"array\.cols.*exceed"),
])
def test_malformed_file_names_file_key_and_problem(tmp_path, edit, pattern):
    path = _copy(tmp_path, edit)
    with pytest.raises(TargetFileError) as err:
        load_target(str(path))
    assert str(path) in str(err.value)
    assert re.search(pattern, str(err.value)), str(err.value)


def test_unknown_target_lists_valid_ones():
    with pytest.raises(UsageError, match=r"unknown target 'xdna3' \(did you mean 'xdna' or "
                                         r"'xdna2'\?\); valid: ascend-950pr, cpu, cpu-amx, "
                                         r"edge-npu, h100, h200, tpu-v1, tpu-v2, tpu-v3, "
                                         r"tpu-v4, xdna, xdna2"):
        load_target("xdna3")
    with pytest.raises(UsageError, match="does not exist"):
        load_target("/nonexistent/file.toml")
