"""An out-of-tree target family (tests/plugin_example, the package docs/plugins.md walks
through) is installed in this test run, and through its entry points alone dse runs a study of
it, answers dse best, trials, balance and report on it, serves its dashboard study page to a
real browser, runs its command group, and runs the conformance suites on it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_layering import lint_imports

ROOT = Path(__file__).parents[1]
PLUGIN = Path(__file__).parent / "plugin_example"
STUDY = """
name: tiny
target: tiny-npu
workload: {shape: 2048x2048x2048, dtype: int8-int32}
sampler: tpe
budget: {trials: 40}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The plugin built and installed into a folder of its own (nothing of the project's venv
    changes); the environment in which dse sees it."""
    work = tmp_path_factory.mktemp("plugin")
    source, target = work / "source", work / "site"
    shutil.copytree(PLUGIN, source)  # a build writes beside the sources
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--target", str(target), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(target.glob("dse_roofline_npu-*.dist-info/entry_points.txt"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}


def dse(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def study(installed, tmp_path_factory) -> tuple[Path, str]:
    """The plugin's study run by ``dse run``: (its folder, the storage)."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.yaml").write_text(textwrap.dedent(STUDY))
    done = dse(installed, "run", "tiny.yaml", "--storage", "t.db", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert re.search(r"40 trials; this run evaluated \d+", done.stdout)
    assert re.search(r"best configuration \(trial \d+\): tile_m=\d+, tile_n=\d+", done.stdout)
    return folder, "t.db"


def test_the_family_is_listed_and_its_command_runs(installed, tmp_path):
    listing = dse(installed, "targets", cwd=tmp_path)
    assert listing.returncode == 0 and re.search(r"tiny-npu\s+roofline_npu\s+1 engine",
                                                 listing.stdout)
    ridge = dse(installed, "roofline", "ridge", "--target", "tiny-npu", cwd=tmp_path)
    assert ridge.returncode == 0 and "ridge at 125.0 operations per DRAM byte" in ridge.stdout
    assert "roofline" in dse(installed, "--help", cwd=tmp_path).stdout
    # without the package on the path, dse knows nothing of it
    bare = {k: v for k, v in installed.items() if k != "PYTHONPATH"}
    assert "tiny-npu" not in dse(bare, "targets", cwd=tmp_path).stdout


def test_a_metric_of_the_family_is_an_objective(installed, tmp_path):
    (tmp_path / "pareto.yaml").write_text(textwrap.dedent(STUDY).replace(
        "name: tiny", "name: pareto").replace("sampler: tpe", "sampler: nsga2\n"
                                              "objectives: [tops, ops_per_byte]"))
    done = dse(installed, "run", "pareto.yaml", "--storage", "p.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    best = dse(installed, "best", "pareto", "--storage", "p.db", cwd=tmp_path)
    assert best.returncode == 0 and re.search(r"tops\s+ops_per_byte", best.stdout), best.stdout


def test_a_strategy_of_the_package_runs_a_study(installed, tmp_path):
    # registered by its entry point alone: a coarse sweep of every third feasible config,
    # against the exhaustive strategy's count of them
    def trials(name: str, lines: str) -> int:
        (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(STUDY).replace(
            "name: tiny", f"name: {name}").replace("sampler: tpe\nbudget: {trials: 40}", lines))
        done = dse(installed, "run", f"{name}.yaml", "--storage", "s.db", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return int(re.search(r"(\d+) trials; this run evaluated", done.stdout)[1])

    every = trials("all", "sampler: exhaustive")
    assert every > 6
    assert trials("coarse", "strategy: {name: coarse, options: {every: 3}}") == -(-every // 3)
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent(STUDY).replace(
        "sampler: tpe", "strategy: {name: coarse, options: {stride: 3}}"))
    done = dse(installed, "run", "bad.yaml", "--storage", "s.db", cwd=tmp_path)
    assert done.returncode == 2 and "strategy.options.stride" in done.stderr
    assert "takes every" in done.stderr and "Traceback" not in done.stderr


def test_best_trials_balance_and_report(installed, study):
    folder, storage = study
    best = dse(installed, "best", "tiny", "--storage", storage, "--top", "3", cwd=folder)
    assert best.returncode == 0 and re.search(r"tile_m\s+tile_n\s+tops", best.stdout)
    trials = dse(installed, "trials", "tiny", "--storage", storage, "--where", "tops > 7",
                 "--sort=-tops", "--limit", "5", cwd=folder)
    assert trials.returncode == 0 and "of " in trials.stderr and "tile_n" in trials.stdout
    balance = dse(installed, "balance", "tiny", "--storage", storage, cwd=folder)
    assert balance.returncode == 0, balance.stderr
    assert "model's best" in balance.stdout and "dram bandwidth  0.5" in balance.stdout
    assert "paper's procedure" not in balance.stdout  # the family has none
    report = dse(installed, "report", "tiny", "--storage", storage, "--out", "r.html",
                 cwd=folder)
    assert report.returncode == 0, report.stderr
    html = (folder / "r.html").read_text()
    assert "2048x2048x2048 int8-int32" in html and "Roofline" in html


def test_the_dashboard_study_page_in_a_browser(installed, study, chromium_path):
    playwright = pytest.importorskip("playwright.sync_api")
    folder, storage = study
    server = subprocess.Popen([sys.executable, "-m", "dse.cli", "dashboard", "--storage",
                               storage, "--port", "0"], env=installed, cwd=folder,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", server.stdout.readline())
        assert match, server.stderr.read()
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{match.group(1)}/study/tiny")
            page.wait_for_selector(".plotly .main-svg")
            text = page.inner_text("body")
            out = ROOT / "test-output" / "dashboard"
            out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out / "plugin-study.png"), full_page=True)
            page.click("#added-pages a:text('Ridge')")  # the package's own page
            page.wait_for_selector("#ridge")
            added = page.inner_text("main")
            page.screenshot(path=str(out / "plugin-page.png"), full_page=True)
            missing = page.goto(f"{match.group(1)}/page/ridgee/tiny")
            browser.close()
        assert not errors, errors
        assert "2048x2048x2048 int8-int32" in text and "tile_m" in text
        assert "Roofline" in text and "Optimisation history" in text
        assert "Ridge of tiny" in added and "ridge at 125.0 operations per DRAM byte" in added
        assert re.search(r"2048x2048x2048 int8-int32\s+\d+\s+\d+\s+\d+x\d+", added), added
        assert missing.status == 404
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_conformance_suites_pass_on_the_family(installed):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_conformance_space.py", "tests/test_conformance_target.py",
                           "tests/test_conformance_evaluator.py", "-k", "roofline or tiny"],
                          env=installed, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    passed = int(re.search(r"(\d+) passed", done.stdout).group(1))
    assert passed >= 15 and "failed" not in done.stdout


def test_the_family_imports_only_the_contract(installed, tmp_path):
    config = tmp_path / "contracts.ini"
    config.write_text(textwrap.dedent("""
        [importlinter]
        root_packages =
            roofline_npu
            dse
            search_spaces
            evaluators
            families

        [importlinter:contract:plugin]
        name = the plugin imports only dse.core
        type = forbidden
        source_modules = roofline_npu
        forbidden_modules =
            dse.cli
            dse.study
            dse.storage
            dse.analysis
            dse.dashboard
            dse.offline
            search_spaces
            evaluators
            families

        [importlinter:contract:layers]
        name = the record binds the model and the space; the space knows neither
        type = layers
        layers =
            roofline_npu.family
            roofline_npu.model
            roofline_npu.space
    """))
    done = lint_imports(str(config), env=installed)
    assert done.returncode == 0 and "2 kept, 0 broken" in done.stdout, done.stdout
