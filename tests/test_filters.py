"""The trial filter language: what it accepts, and that it rejects everything else."""

from __future__ import annotations

import pandas as pd
import pytest

from dse.core.errors import UsageError
from dse.storage.filters import apply_filter

FRAME = pd.DataFrame({"tops": [10.0, 31.0, 35.0, 40.0], "k_ct": [32, 64, 72, 64],
                      "bound": ["memory", "compute", "memory", "compute"],
                      "reason": [None, None, "x", None]})


@pytest.mark.parametrize(("expr", "rows"), [
    ("tops > 30 and k_ct <= 64", [1, 3]),
    ("tops > 30 and k_ct <= 64 or k_ct == 32", [0, 1, 3]),
    ("not (bound == 'memory')", [1, 3]),
    ('bound = "compute" and tops >= 40', [3]),
    ("k_ct != 64", [0, 2]),
    ("reason == 'x'", [2]),
    ("30 < tops", [1, 2, 3]),
    ("tops > 1e1", [1, 2, 3]),
])
def test_filters(expr, rows):
    assert list(apply_filter(FRAME, expr).index) == rows


@pytest.mark.parametrize(("expr", "message"), [
    ("speed > 3", "unknown column 'speed'; columns: tops, k_ct"),
    ("tops >", "ends too early"),
    ("tops > 3 and", "ends too early"),
    ("(tops > 3", "ends too early"),
    ("(tops > 3 k_ct", "missing ')'"),
    ("tops 3", "expected a comparison"),
    ("tops > 3; DROP TABLE dse_trials", "cannot read ';"),
    ("__import__('os')", "unknown column '__import__'"),
    ("1 < 2", "needs at least one column"),
    ("", "is empty"),
])
def test_bad_filters(expr, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        apply_filter(FRAME, expr)
