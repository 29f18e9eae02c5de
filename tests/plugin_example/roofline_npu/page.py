"""A dashboard page of the package's own: each workload's configs against the target's ridge
(``pyproject.toml`` names it in ``dse.pages``; the dashboard links it from the study page)."""

from __future__ import annotations

from html import escape

from dse.core import PageData, StudyPage


def render_ridge(data: PageData) -> str:
    """Per workload: the ridge, how many configs fall on each side of it, and the best one."""
    peak, bandwidth = data.target.roofline()
    ridge = peak / bandwidth
    rows = []
    ok = data.trials[data.trials["status"] == "ok"]
    for (shape, dtype), group in ok.groupby(["shape", "dtype"], sort=True):
        best = group.loc[group["tops"].idxmax()]
        memory_bound = int((group["ops_per_byte"] < ridge).sum())
        rows.append(
            f"<tr><td class='text'>{escape(str(shape))} {escape(str(dtype))}</td>"
            f"<td>{memory_bound}</td><td>{len(group) - memory_bound}</td>"
            f"<td>{int(best['tile_m'])}x{int(best['tile_n'])}</td>"
            f"<td>{best['ops_per_byte']:.1f}</td><td>{best['tops']:.2f}</td></tr>")
    return (f"<p id='ridge'>{escape(data.target.name)}: ridge at {ridge:.1f} operations per "
            f"DRAM byte ({peak / 1e12:.1f} TOPS over {bandwidth / 1e9:.0f} GB/s).</p>"
            "<table class='grid'><tr><th class='text'>workload</th><th>below the ridge</th>"
            "<th>above it</th><th>best tile</th><th>its ops/byte</th><th>its TOPS</th></tr>"
            + "".join(rows) + "</table>")


RIDGE = StudyPage("ridge", "Ridge", render_ridge, spaces=("roofline_npu",))
