"""The real dashboard (``dse dashboard`` in its own process) driven by headless Chromium.

Every page must load without console errors and draw its plots; the best configuration shown
must be the one ``dse best`` names; sorting, filtering and paging must work. Screenshots go to
``test-output/dashboard/`` (or ``$DSE_TEST_OUTPUT/dashboard``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dse.cli import main
from dse.study.runner import run_study
from dse.study.spec import study_from_dict
from tests.dashboard_process import LAUNCH, dashboard
from tests.study_helpers import LADDER, TWO_WORKLOADS

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                 "(pip install -e '.[test]')")

OUTPUT = Path(os.environ.get("DSE_TEST_OUTPUT", Path(__file__).parent.parent / "test-output"))
ASCEND = {"name": "asc", "target": "ascend-950pr", "sampler": "random", "seed": 0,
          "workloads": [{"shape": "8x2048x1024x2048", "dtype": "bf16"},
                        {"shape": "8/1x512x256x512", "dtype": "bf16"}],
          "budget": {"trials": 30}}


MIX = {"name": "mix", "target": "xdna2", "sampler": "random", "seed": 0,
       "workloads": {"model": {"name": "tiny", "hidden": 256, "intermediate": 512, "heads": 4,
                               "kv_heads": 2, "vocab": 1000, "layers": 2},
                     "tokens": {"decode": [1, 8], "prefill": [64]}, "dtype": "int8-int8"},
       "budget": {"trials": 6}}


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("browser") / "b.db")
    for spec in (LADDER, TWO_WORKLOADS, ASCEND, MIX):
        run_study(study_from_dict(spec), path)
    return path


@pytest.fixture(scope="module")
def server(storage):
    with dashboard(storage) as base:
        yield base


@pytest.fixture(scope="module")
def browser(chromium_path):
    with playwright.sync_playwright() as p:
        # root in a container cannot use Chromium's sandbox
        browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser, request):
    """A page that records console errors and uncaught exceptions; the test fails on any,
    and its screenshot is saved."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    yield page
    folder = OUTPUT / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert errors == [], errors


def _plots_drawn(page, at_least: int) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('.plotly-graph-div .main-svg').length >= {2 * at_least}")
    graphs = page.locator(".plotly-graph-div")
    assert graphs.count() >= at_least
    for i in range(graphs.count()):  # every graph has drawn its traces
        assert graphs.nth(i).locator(".trace, .parcoords").count()
    # in the house template (plotly_white), which the page loads once for all its plots
    assert page.evaluate("[...document.querySelectorAll('.plotly-graph-div')]"
                         ".every(g => g.layout.template.layout.plot_bgcolor === 'white')")


def _column(page, name: str) -> list[float]:
    return [float(t) for t in page.locator(f'#trials td[data-column="{name}"]').all_inner_texts()]


def test_studies_list(page, server):
    page.goto(server + "/")
    rows = page.locator("#studies tr")
    assert rows.count() == 5  # header, asc, lad, mix, two
    assert "xdna2" in page.locator("#studies").inner_text()


def test_study_page_shows_what_dse_best_names(page, server, storage, capsys):
    assert main(["best", "lad", "--storage", storage, "--json", "--top", "1"]) == 0
    best = json.loads(capsys.readouterr().out)[0]
    page.goto(f"{server}/study/lad")
    _plots_drawn(page, 6)
    assert page.locator("#best-1 .best-number").inner_text() == str(best["number"])
    assert page.locator("#best-1 .best-value").inner_text() == f"{best['tops']:.4g}"
    page.locator("#best-1 .best-number").click()
    page.wait_for_url(f"**/config/{best['number']}/lad")
    assert page.locator("#status").inner_text() == "ok"


def test_study_page_per_workload(page, server):
    page.goto(f"{server}/study/two")
    assert page.locator("section.workload").count() == 2
    _plots_drawn(page, 8)


def test_trials_table_sorts_filters_and_pages(page, server):
    page.goto(f"{server}/trials/two?limit=10")
    page.locator('th[data-column="k_ct"] a').click()
    page.wait_for_url("**sort=-k_ct**")
    values = _column(page, "k_ct")
    assert len(values) == 10 and values == sorted(values, reverse=True)
    page.locator('th[data-column="k_ct"] a').click()
    page.wait_for_url(re.compile(r"sort=k_ct"))
    assert _column(page, "k_ct") == sorted(_column(page, "k_ct"))
    total = int(re.search(r"of (\d+) trials", page.locator("#count").inner_text()).group(1))

    page.locator("input[name=where]").fill("status == 'ok' and tops > 5")
    page.locator("form.filter button").click()
    page.wait_for_url("**where=**")
    shown = _column(page, "tops")
    assert shown and all(v > 5 for v in shown)
    matching = int(re.search(r"of (\d+) trials", page.locator("#count").inner_text()).group(1))
    assert 10 < matching < total
    page.locator("#next").click()
    page.wait_for_url("**page=2**")
    assert page.locator("#count").inner_text().startswith("11")
    assert all(v > 5 for v in _column(page, "tops"))


def test_a_bad_filter_is_explained(browser, server):
    page = browser.new_page()
    page.goto(f"{server}/trials/two?where=nope%20%3E%201")
    assert "unknown column 'nope'" in page.locator("#error").inner_text()
    page.close()


def test_config_page(page, server):
    page.goto(f"{server}/config/6/lad")  # the first simulated trial
    _plots_drawn(page, 3)
    assert page.locator("#timeline").count() == 1
    assert page.locator("#params").inner_text().count("\n") >= 5


def test_compare_page(page, server):
    page.goto(f"{server}/compare")
    page.locator("select[name=a]").select_option("two")
    page.locator("select[name=b]").select_option("lad")
    page.locator("form button").click()
    page.wait_for_url("**a=two**")
    assert page.locator(".study").count() == 2
    _plots_drawn(page, 3)


def test_deployment_page_of_a_model_mix(page, server, storage, capsys):
    page.goto(f"{server}/study/mix")
    page.locator("#deployment").click()
    page.wait_for_url("**/cover/mix")
    _plots_drawn(page, 3)  # the K curve, shapes x kernels, the losses
    assert main(["cover", "mix", "--storage", storage, "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    shown = page.locator("#cover-summary").inner_text()
    assert f"{100 * table['fraction']:.1f} %" in shown
    assert page.locator("#cover-kernels tr").count() == 1 + len(table["kernels"])
    page.locator("#cover-form input[name=kernels]").fill("2")
    page.locator("#cover-form button").click()
    page.wait_for_url("**kernels=2**")
    _plots_drawn(page, 3)
    assert page.locator("#cover-kernels tr").count() <= 3
    assert page.locator("#cover-shapes tr").count() == 1 + 14


def test_ascend_study_and_config_pages(page, server):
    page.goto(f"{server}/study/asc")
    assert page.locator("section.workload").count() == 2
    _plots_drawn(page, 8)
    page.locator("#best-1 .best-number").click()
    page.wait_for_url("**/config/**")
    _plots_drawn(page, 3)


_GRAPH_BY_TITLE = """(title) => [...document.querySelectorAll('.plotly-graph-div')].findIndex(
    g => ((g.layout.title || {}).text || '').startsWith(title))"""
_FIRST_POINT = """(index) => {
    const gd = document.querySelectorAll('.plotly-graph-div')[index];
    const trace = gd._fullData.find(t => t.customdata && t.customdata.length);
    const xa = gd._fullLayout[trace.xaxis.replace('x', 'xaxis')],
          ya = gd._fullLayout[trace.yaxis.replace('y', 'yaxis')];
    const box = gd.getBoundingClientRect();
    return [box.left + xa._offset + xa.c2p(trace.x[0]), box.top + ya._offset + ya.c2p(trace.y[0])];
}"""


def _point_of(page, title: str) -> tuple[float, float]:
    index = page.evaluate(_GRAPH_BY_TITLE, title)
    assert index >= 0, f"no plot titled {title!r}"
    page.locator(".plotly-graph-div").nth(index).scroll_into_view_if_needed()
    return tuple(page.evaluate(_FIRST_POINT, index))


@pytest.mark.parametrize(("title", "named"), [
    ("The balance point", ("m_ct=", "tops=")), ("Roofline", ("m_ct=", "tops=")),
    ("Slices", ("m_ct=", "tops=")), ("Optimisation history", ("tops=",))])
def test_a_point_names_its_trial_and_opens_its_config(page, server, title, named):
    page.goto(f"{server}/study/two")
    _plots_drawn(page, 8)
    x, y = _point_of(page, title)
    page.mouse.move(x, y)
    label = page.locator(".hoverlayer .hovertext").first
    label.wait_for()
    text = label.text_content()
    number = int(re.search(r"trial (\d+)", text).group(1))
    assert all(name in text for name in named), text
    (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / "dashboard" / f"hover_{title.split()[-1].lower()}.png"),
                    clip={"x": max(x - 350, 0), "y": max(y - 200, 0), "width": 700,
                          "height": 400})
    page.mouse.click(x, y)
    page.wait_for_url(f"**/config/{number}/two")
    assert page.locator("#status").inner_text() == "ok"


def test_parallel_coordinates_slices_and_contour(page, server):
    page.goto(f"{server}/study/two")
    _plots_drawn(page, 8)
    titles = page.evaluate("[...document.querySelectorAll('.plotly-graph-div')]"
                           ".map(g => (g.layout.title || {}).text || '')")
    for start in ("The balance point", "Parallel coordinates", "Slices", "Best tops over"):
        assert sum(t.startswith(start) for t in titles) == 2, start  # one per workload
    assert page.locator(".parcoords .axis-title").count() >= 4  # an axis per parameter
    assert page.locator(".contour").count() == 2
    # the balance plot draws t_comp = t_mem and marks the best config
    balance = page.evaluate(_GRAPH_BY_TITLE, "The balance point")
    names = page.evaluate("(i) => document.querySelectorAll('.plotly-graph-div')[i]"
                          ".data.map(t => t.name)", balance)
    assert "t_comp = t_mem" in names and "best" in names


def test_a_running_study_s_page_follows_it_without_reloading(browser, tmp_path):
    import time

    from dse.storage import open_store

    storage = str(tmp_path / "live.db")
    study = tmp_path / "live.yaml"
    study.write_text("name: live\ntarget: xdna2\n"
                     "workload: {shape: 2048x2048x2048, dtype: int8-int8}\n"
                     "evaluator: {name: synthetic, options: {work_s: 0.03}}\n"
                     "sampler: random\nseed: 0\nbudget: {trials: 400}\n")
    run = subprocess.Popen([sys.executable, "-c", LAUNCH, "run", str(study), "--storage",
                            storage], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every plot exists once some trials are feasible
            try:
                trials = open_store(storage).trial_page("live", where="status == 'ok'",
                                                        limit=1).total
            except Exception:  # not created yet
                trials = 0
            if trials >= 25:
                break
            time.sleep(0.2)
        assert trials >= 25, run.stderr.read() if run.poll() is not None else "too slow"
        with dashboard(storage) as base:
            _follow_the_live_study(browser, base, run)
    finally:
        run.kill()


def _zoom_into(page, graph) -> list[float]:
    """Drag across the middle of ``graph``'s x axis, as a user zooms; returns the x range."""
    box = graph.locator(".nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=5)
    page.mouse.up()
    return graph.evaluate("g => g.layout.xaxis.range")


def _follow_the_live_study(browser, base: str, run: subprocess.Popen) -> None:
    """The live study's page, opened while it runs, followed until it stops."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{base}/study/live")
    _plots_drawn(page, 8)
    assert page.locator("#status").inner_text() == "running"
    first = int(page.locator("#total").inner_text().replace(",", ""))
    # marks on the window and on the history plot's node: a reload would lose them
    points = page.evaluate("() => { window.__kept = true; const g = document.querySelector("
                           "'.plotly-graph-div'); g.__kept = true;"
                           " return g.calcdata[0].length; }")
    zoomed = _zoom_into(page, page.locator(".plotly-graph-div").first)
    page.wait_for_function(f"parseInt(document.getElementById('total').textContent"
                           f".replace(/,/g, '')) > {first}", timeout=30000)
    page.wait_for_function(f"document.querySelector('.plotly-graph-div').calcdata[0].length"
                           f" > {points}", timeout=30000)
    assert page.evaluate("() => window.__kept === true && "
                         "document.querySelector('.plotly-graph-div').__kept === true")
    # redrawn with the new trials, the plot keeps the user's zoom
    assert page.evaluate("() => document.querySelector('.plotly-graph-div')"
                         ".layout.xaxis.range") == zoomed
    run.wait(timeout=60)
    page.wait_for_function("document.getElementById('live-note').textContent"
                           ".includes('stopped')", timeout=30000)
    assert page.locator("#status").inner_text() == "finished"
    assert int(page.locator("#total").inner_text().replace(",", "")) == 400
    (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / "dashboard" / "live_study.png"), full_page=True)
    page.close()


MANY = {"name": "many", "target": "xdna2", "sampler": "random", "seed": 2,
        "workloads": [{"shape": f"{m}x2048x{n}", "dtype": "int8-int8"}
                      for m in (512, 1024, 2048) for n in (512, 1024, 4096)],
        "budget": {"trials": 15}}


def test_a_study_of_many_workloads_shows_a_summary_then_one_at_a_time(browser, tmp_path):
    storage = str(tmp_path / "many.db")
    run_study(study_from_dict(MANY), storage)
    with dashboard(storage) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/study/many")
        assert page.locator("#overview tr").count() == 1 + 9
        assert page.locator("#workload-select option").count() == 9
        assert page.locator("section.workload").count() == 1
        assert page.locator("#workload-1").count() == 1
        titles = page.evaluate("[...document.querySelectorAll('.plotly-graph-div')]"
                               ".map(g => (g.layout.title || {}).text || '')")
        assert "Best tops of each workload" in titles
        summary = page.evaluate(_GRAPH_BY_TITLE, "Best tops of each workload")
        assert page.evaluate("(i) => document.querySelectorAll('.plotly-graph-div')[i]"
                             ".calcdata[0].length", summary) == 9
        # choosing another workload shows that one alone
        label = page.locator("#workload-select option").nth(4).inner_text()
        page.locator("#workload-select").select_option(index=4)
        page.wait_for_url("**workload=5**")
        assert page.locator("section.workload").count() == 1
        assert page.locator("#workload-5 h2").inner_text() == label
        (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "dashboard" / "many_workloads.png"), full_page=True)
        # its trials, and those only
        page.locator("#workload-5 a.workload-trials").click()
        page.wait_for_url("**/trials/many?where=**")
        shape = label.split(" ")[0]
        shapes = page.locator('#trials td[data-column="shape"]').all_inner_texts()
        assert len(shapes) == 15 and set(shapes) == {shape}
        assert page.locator("p.workloads a").count() == 1 + 9
        assert page.locator("p.workloads a.chosen").inner_text() == label
        page.close()


_MENU_OF = """([i, item]) => {
    const menus = document.querySelectorAll('.plotly-graph-div')[i].layout.updatemenus || [];
    for (const [m, menu] of menus.entries()) {
        const b = menu.buttons.findIndex(button => button.label === item);
        if (b >= 0) return [m, b];
    }
    return null; }"""
_PICKED = """([i, m, b]) => {
    const gd = document.querySelectorAll('.plotly-graph-div')[i];
    return gd.layout.updatemenus[m].active === b
        && !gd.querySelector('.updatemenu-dropdown-button'); }"""


def _choose(page, graph: int, item: str) -> None:
    """Pick ``item`` in the menu of plot ``graph`` that holds it, and wait until the plot has
    taken it. Only that menu is opened (found in the figure's layout): opening each menu in turn
    to look for the item left an open dropdown over the next menu's header, which a busy
    machine's click could land on."""
    found = page.evaluate(_MENU_OF, [graph, item])
    if found is None:
        pytest.fail(f"no menu item {item!r}")
    menu, button = found
    plot = page.locator(".plotly-graph-div").nth(graph)
    plot.locator(".updatemenu-header-group").nth(menu).click()
    choice = plot.locator(".updatemenu-dropdown-button").filter(
        has=page.locator(".updatemenu-item-text", has_text=re.compile(f"^{re.escape(item)}$")))
    choice.wait_for(state="visible")
    choice.click()
    # the menu marks the choice active and folds once Plotly has applied it
    page.wait_for_function(_PICKED, arg=[graph, menu, button])


def test_the_explorer_takes_the_axes_and_colour_chosen(page, server):
    page.goto(f"{server}/study/two")
    _plots_drawn(page, 8)
    graph = page.evaluate(_GRAPH_BY_TITLE, "Explore")
    page.locator(".plotly-graph-div").nth(graph).scroll_into_view_if_needed()
    _choose(page, graph, "x: k_ct")
    _choose(page, graph, "colour: t_mem_s")
    state = page.evaluate("""(i) => { const g = document.querySelectorAll('.plotly-graph-div')[i];
        return [g.layout.xaxis.title.text, g._fullData[0].x.slice(0, 5),
                g._fullData[0].customdata.slice(0, 5),
                g._fullData[0].marker.colorbar.title.text]; }""", graph)
    title, xs, numbers, colour = state
    assert title == "k_ct" and colour == "t_mem_s"
    # each point's x is its own trial's k_ct
    for number, x in zip(numbers, xs, strict=True):
        page_row = page.request.get(f"{server}/trials/two?where=number%20%3D%3D%20{number}")
        assert f'data-column="k_ct">{int(x)}<' in page_row.text()


def test_parallel_coordinates_of_many_parameters_show_the_most_important(page, server):
    page.goto(f"{server}/study/asc")
    _plots_drawn(page, 8)
    graph = page.evaluate(_GRAPH_BY_TITLE, "Parallel coordinates")
    page.locator(".plotly-graph-div").nth(graph).scroll_into_view_if_needed()
    shown = """(i) => document.querySelectorAll('.plotly-graph-div')[i]
        .querySelectorAll('.parcoords .axis-title').length"""
    assert page.evaluate(shown, graph) == 8 + 1  # the 8 most important and the objective
    count = page.evaluate("(i) => document.querySelectorAll('.plotly-graph-div')[i]"
                          ".data[0].dimensions.length", graph) - 1
    assert count > 8
    _choose(page, graph, f"axes: all {count}")
    assert page.evaluate(shown, graph) == count + 1
    _choose(page, graph, "axes: the 4 most important")
    assert page.evaluate(shown, graph) == 4 + 1


_FITS = """() => {
    const out = [];
    if (document.documentElement.scrollWidth > window.innerWidth)
        out.push(`the page is ${document.documentElement.scrollWidth} px wide`);
    document.querySelectorAll('.plotly-graph-div').forEach((g) => {
        const box = g.getBoundingClientRect();
        g.querySelectorAll('.gtitle, [class^="g-"][class$="title"] text').forEach((t) => {
            const r = t.getBoundingClientRect();
            if (r.width && (r.left < box.left - 1 || r.right > box.right + 1
                            || r.top < box.top - 1 || r.bottom > box.bottom + 1))
                out.push(`${(g.layout.title || {}).text}: ${t.textContent} is cut`);
        });
    });
    return out; }"""


def test_pages_fit_the_window_and_plots_their_titles(page, server, storage):
    from dse.storage import open_store

    trials = open_store(storage, read_only=True).load_trials("two")
    infeasible = int(trials.loc[trials["status"] != "ok", "number"].iloc[0])
    best = int(trials.sort_values("tops", ascending=False)["number"].iloc[0])
    for path in ("/", "/study/two", "/study/asc", "/trials/two", "/trials/asc",
                 f"/config/{best}/two", f"/config/{infeasible}/two", "/compare?a=two&b=lad"):
        page.goto(server + path)
        if page.locator(".plotly-graph-div").count():
            _plots_drawn(page, 1)
        assert page.evaluate(_FITS) == [], path


def test_a_three_objective_front_has_its_third_as_colour(browser, tmp_path):
    storage = str(tmp_path / "mo3.db")
    run_study(study_from_dict({"name": "mo3", "target": "xdna2", "sampler": "nsga2", "seed": 1,
                               "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
                               "objectives": ["tops", "l1_bytes", "dram_bytes"],
                               "budget": {"trials": 60}}), storage)
    with dashboard(storage) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/study/mo3")
        _plots_drawn(page, 6)
        graph = page.evaluate(_GRAPH_BY_TITLE, "Pareto front, 3 objectives")
        assert graph >= 0
        axes = page.evaluate("""(i) => {
            const g = document.querySelectorAll('.plotly-graph-div')[i];
            const [grey, front] = g._fullData;
            return [g.layout.xaxis.title.text, g.layout.yaxis.title.text,
                    front.marker.colorbar.title.text, grey.name, grey.marker.color]; }""", graph)
        # the dominated trials are drawn too, in grey, under the coloured front
        assert axes == ["tops", "l1_bytes", "dram_bytes", "dominated trials", "#b8b8b8"]
        page.locator(".plotly-graph-div").nth(graph).scroll_into_view_if_needed()
        _choose(page, graph, "y: dram_bytes")
        # both move to the axis chosen
        assert page.evaluate("""(i) => { const g = document.querySelectorAll(
            '.plotly-graph-div')[i]; return [g.layout.yaxis.title.text,
            ...g._fullData.map(t => t.y[0] > 1e5)]; }""", graph) == ["dram_bytes", True, True]
        (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
        page.locator(".plotly-graph-div").nth(graph).screenshot(
            path=str(OUTPUT / "dashboard" / "pareto_three_objectives.png"))
        page.close()


def test_optuna_dashboard_opens_the_export_with_real_parameters(browser, storage, tmp_path):
    import shutil
    import socket
    import time
    import urllib.request

    out = tmp_path / "two.log"
    assert main(["optuna-export", "two", "--storage", storage, "--out", str(out)]) == 0
    command = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) \
        or shutil.which("optuna-dashboard")
    assert command, "optuna-dashboard is a test dependency (pip install -e '.[test]')"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([command, str(out), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/api/studies", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/dashboard/studies/0/trials")
        page.get_by_text("Trial 0", exact=True).first.wait_for()
        # the trial's real parameters, its metrics as user attributes
        for text in ("m_ct", "k_ct", "shape 2048x2048x2048", "evaluator analytical"):
            assert page.get_by_text(text).count(), text
        (OUTPUT / "dashboard").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "dashboard" / "optuna_dashboard.png"))
        # numeric parameters on numeric axes, in order (not categories sorted as text)
        page.goto(f"{base}/dashboard/studies/0/analytics")
        page.wait_for_function("['plot-slice', 'graph-rank'].every(id => "
                               "document.querySelector(`#${id} .main-svg`))", timeout=30000)
        slice_axis, rank_axes = page.evaluate("""() => {
            const axis = (id, a) => document.getElementById(id)._fullLayout[a];
            const s = axis('plot-slice', 'xaxis');
            return [[s.type, s.title.text],
                    [axis('graph-rank', 'xaxis').type, axis('graph-rank', 'yaxis').type]]; }""")
        assert slice_axis[0] in ("linear", "log") and slice_axis[1].startswith("Param ")
        assert "category" not in rank_axes
        page.screenshot(path=str(OUTPUT / "dashboard" / "optuna_dashboard_analytics.png"),
                        full_page=True)
        page.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
