import pytest

from dse.core.errors import UsageError
from dse.core.workload import GemmWorkload


def test_parse_paper_order():
    w = GemmWorkload.parse("4032x4320x4608", "int8-int16")
    assert (w.M, w.K, w.N) == (4032, 4320, 4608)
    assert (w.dtype.in_bytes, w.dtype.out_bytes, w.b_layout) == (1, 2, "col")
    assert w.macs == 4032 * 4320 * 4608 and w.shape == "4032x4320x4608"


@pytest.mark.parametrize(("shape", "dtype", "layout", "message"), [
    ("4096x4096", "int8-int8", "col", "not of the form MxKxN"),
    ("0x16x16", "int8-int8", "col", "dimension M must be a positive"),
    ("16x16x16", "int8-fp8", "col", "unknown dtype 'int8-fp8'; valid: int8-int8"),
    ("16x16x16", "int8-int8", "diag", "unknown B layout 'diag'; valid: col, row"),
])
def test_bad_workloads(shape, dtype, layout, message):
    with pytest.raises(UsageError, match=message):
        GemmWorkload.parse(shape, dtype, layout)
