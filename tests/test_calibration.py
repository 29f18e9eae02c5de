"""The constants in the shipped target files are exactly what the calibration produces."""

from __future__ import annotations

import pytest

from dse.core.registry import load_target
from evaluators.analytical.calibration import calibrate, calibrated_values, write_values


@pytest.fixture(scope="module")
def fitted():
    return calibrate()


def test_shipped_constants_match_the_fit(fitted):
    for cal in fitted:
        shipped = calibrated_values(load_target(cal.target.name))
        for key, value in calibrated_values(cal.target).items():
            assert shipped[key] == pytest.approx(value, rel=1e-3, abs=1e-9), key


def test_fit_quality(fitted):
    xdna, xdna2 = fitted
    assert max(abs(e) for e in xdna.end_to_end_residuals.values()) < 0.03
    assert max(abs(e) for e in xdna.kernel_residuals.values()) < 0.04
    assert xdna2.end_to_end_residuals == {}  # nothing end-to-end is fitted on XDNA2


def test_write_values_keeps_layout(tmp_path, fitted):
    src = load_target("xdna")
    path = tmp_path / "xdna.toml"
    path.write_text(open(src.source).read().replace("dispatch_s = ", "dispatch_s = 9"))
    write_values(path, fitted[0].target)
    text = path.read_text()
    assert "# [calibrated]" in text and "[overheads]" in text
    assert load_target(str(path)).overheads.dispatch_s == pytest.approx(
        fitted[0].target.overheads.dispatch_s, rel=1e-5)
