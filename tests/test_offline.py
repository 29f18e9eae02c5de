"""Offline measurement: export the best configs, run the standalone runner, ingest the results."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dse import load_trials
from dse.cli import main
from dse.offline.ingest import ingest, read_results
from dse.storage import open_store
from dse.study.runner import run_study
from dse.study.spec import study_from_dict

RUNNER = Path(__file__).parents[1] / "dse" / "offline" / "runner.py"
MEASURED_STUDY = {"name": "m", "target": "cpu", "sampler": "exhaustive",
                  "workload": {"shape": "128x128x128", "dtype": "fp32-fp32"},
                  "space": {"free": ["pack_a"]}}


def test_export_run_ingest_round_trip(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("dse.storage.runs.MIN_TRIALS", 1)  # the study's frame kept, however small
    storage = str(tmp_path / "r.db")
    run_study(study_from_dict({
        "name": "model-only", "target": "cpu",
        "workload": {"shape": "256x256x256", "dtype": "fp32-fp32"},
        "space": {"free": ["pack_a"]}, "sampler": "exhaustive"}), storage)
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    assert main(["export-configs", "model-only", "--top", "3", "--out", str(configs),
                 "--storage", storage]) == 0
    exported = json.loads(configs.read_text())
    assert exported["format"] == "dse-configs/1" and len(exported["configs"]) == 3
    assert exported["configs"][0]["job"]["kind"] == "python"  # the CPU kernel module, run there
    # the runner needs only Python and NumPy: run it as a plain script, away from the repo
    copy = tmp_path / "elsewhere" / "runner.py"
    copy.parent.mkdir()
    copy.write_text(RUNNER.read_text())
    subprocess.run([sys.executable, str(copy), str(configs), str(results)], check=True,
                   cwd=copy.parent, capture_output=True)
    before = len(load_trials(storage, "model-only"))
    assert main(["ingest", str(results), "--storage", storage]) == 0
    assert "3 new evaluations, 3 new trials" in capsys.readouterr().out
    frame = load_trials(storage, "model-only")
    measured = frame[frame["evaluator"] == "cpu"]
    assert len(frame) == before + 3 and len(measured) == 3 and (measured["tops"] > 0).all()
    assert measured["host"].notna().all()
    with sqlite3.connect(storage) as conn:  # the frame kept at the run's end was kept again
        assert conn.execute("SELECT trials FROM dse_frame_snapshots").fetchall() == [(len(frame),)]
    # a second ingest adds nothing
    assert main(["ingest", str(results), "--storage", storage]) == 0
    assert "0 new evaluations, 0 new trials" in capsys.readouterr().out
    assert len(load_trials(storage, "model-only")) == before + 3


def test_iron_export_carries_the_commands_and_ingest_interprets_the_output(tmp_path, capsys):
    storage = str(tmp_path / "r.db")
    stock = {"buf_a_l1": 2, "buf_b_l1": 2, "buf_c_l1": 2, "buf_a_l2": 2, "buf_b_l2": 2,
             "buf_c_l2": 2, "k_mt": 64}
    run_study(study_from_dict({
        "name": "npu", "target": "xdna2",
        "workload": {"shape": "2048x2048x2048", "dtype": "int8-int8"},
        "space": {"fix": {**stock, "k_ct": 64, "m_ct": 128}}, "sampler": "exhaustive"}), storage)
    configs = tmp_path / "configs.json"
    assert main(["export-configs", "npu", "--top", "2", "--out", str(configs), "--evaluator",
                 "iron", "--option", "mlir_aie_dir=/nonexistent/mlir-aie", "--option",
                 "flow=jit", "--storage", storage]) == 0
    job = json.loads(configs.read_text())["configs"][0]["job"]
    assert job["kind"] == "command" and job["commands"][0][:2] == ["python3", "whole_array.py"]
    results = tmp_path / "results.json"
    data = json.loads(configs.read_text())
    data["configs"] = data["configs"][:1]
    configs.write_text(json.dumps(data))
    # on the device machine the tool printed a passing run; here we record that output
    subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)], check=True,
                   capture_output=True)
    recorded = json.loads(results.read_text())
    recorded["results"][0].update(
        output="NPU time     (avg/min/max us): 900.0 / 880.0 / 950.0\nPASS!\n", returncode=0)
    results.write_text(json.dumps(recorded))
    assert main(["ingest", str(results), "--storage", storage]) == 0
    frame = load_trials(storage, "npu")
    (iron,) = frame[frame["evaluator"] == "iron"].to_dict("records")
    assert iron["status"] == "ok" and iron["latency_s"] == pytest.approx(900e-6)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A cpu study with 3 configs exported and measured by the runner (not yet ingested)."""
    folder = tmp_path_factory.mktemp("measured")
    storage = str(folder / "r.db")
    run_study(study_from_dict(MEASURED_STUDY), storage)
    configs, results = folder / "configs.json", folder / "results.json"
    assert main(["export-configs", "m", "--top", "3", "--out", str(configs),
                 "--storage", storage]) == 0
    subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)], check=True,
                   capture_output=True)
    return storage, json.loads(results.read_text())


def _edit_first(data, **changes):
    first = data["results"][0]
    first.update({k: v for k, v in changes.items() if k not in ("params", "metrics")})
    first["params"].update(changes.get("params", {}))
    first["metrics"].update(changes.get("metrics", {}))
    first["metrics"] = {k: v for k, v in first["metrics"].items() if v is not None}
    return data


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: _edit_first(d, params={"mc": "abc"}), "results[0]: parameter mc: 'abc' is not"),
    (lambda d: _edit_first(d, params={"mc": 10**23}), "and <= 2147483647"),
    (lambda d: _edit_first(d, params={"bogus": 1}), "unknown parameter 'bogus'"),
    (lambda d: _edit_first(d, workload={**d["results"][0]["workload"], "M": 512}),
     "workload 512x128x128 fp32-fp32 (B col) is not one of the study's (128x128x128"),
    (lambda d: _edit_first(d, id="elsewhere"), "its id 'elsewhere' is not the one"),
    (lambda d: _edit_first(d, status="weird"), "unknown status 'weird'"),
    (lambda d: _edit_first(d, metrics={"tops": "fast"}), "metric 'tops' must be a finite"),
    (lambda d: _edit_first(d, metrics={"latency_s": -1.0}), "metric 'latency_s' must be a"),
    (lambda d: _edit_first(d, metrics={"latency_s": None, "tops": None}),
     "an ok result needs metric 'latency_s' or 'tops'"),
    (lambda d: {**d, "results": [{**d["results"][0], "metrics": {"latency_s": None}}]},
     "an ok result needs metric 'latency_s' or 'tops'"),
    (lambda d: {**d, "results": [*d["results"], {**d["results"][0], "metrics": {"tops": 9.0}}]},
     "results[3] measures the same config as "),
    (lambda d: {**d, "results": None}, "key 'results' must be a list"),
    (lambda d: {**d, "evaluator": {"name": "triton"}},
     "evaluator 'triton' measures triton_gemm configs, not cpu_gemm ones"),
    (lambda d: {**d, "evaluator": {**d["evaluator"], "version": "0"}},
     "measured by cpu version 0"),
    (lambda d: _edit_first(d, metrics={"interpreted": True}), "run by Triton's interpreter"),
])
def test_ingest_refuses_a_bad_record_and_stores_nothing(measured, tmp_path, capsys, edit,
                                                        message):
    storage, data = measured
    before = load_trials(storage, "m")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edit(json.loads(json.dumps(data)))))
    assert main(["ingest", str(bad), "--storage", storage]) == 2
    assert message in capsys.readouterr().err
    assert load_trials(storage, "m").equals(before)


def _failed_first(data, reason):
    data["results"][0].update(status="failed", reason=reason, metrics={})
    return data


def _provenance(data, **changes):
    data["provenance"].update(changes)
    return data


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: _edit_first(d, elapsed_s=float("nan")),
     "results[0]: elapsed_s: expected 0 to 2,592,000 seconds, got nan"),
    (lambda d: _edit_first(d, elapsed_s=-1.0), "results[0]: elapsed_s: expected 0 to"),
    (lambda d: _edit_first(d, elapsed_s=float("inf")), "results[0]: elapsed_s: expected 0 to"),
    (lambda d: _edit_first(d, metrics={"spread": float("inf")}),
     "results[0].metrics['spread']: not a finite number (inf)"),
    (lambda d: _edit_first(d, metrics={"times_s": [1e-5, float("nan")]}),
     "results[0].metrics['times_s'][1]: not a finite number (nan)"),
    (lambda d: _edit_first(d, metrics={"repeats": 2**70}),
     "results[0].metrics['repeats']: an integer beyond 63 bits"),
    (lambda d: _edit_first(d, metrics={"note": "a\0b"}),
     "results[0].metrics['note']: a text may not hold a NUL character"),
    (lambda d: _failed_first(d, "x" * 5_000_000),
     "results[0]: reason: a reason holds at most 100,000 characters, not 5,000,000"),
    (lambda d: _failed_first(d, "a\0b"), "results[0]: reason: a reason may not hold a NUL"),
    (lambda d: _provenance(d, host="h" * 100_000),
     "provenance.host: a host name holds at most 200 characters, not 100,000"),
    (lambda d: _provenance(d, load=float("-inf")),
     "provenance['load']: not a finite number (-inf)"),
], ids=["nan-elapsed", "negative-elapsed", "infinite-elapsed", "infinite-metric",
        "nan-in-a-list", "huge-integer", "nul-in-a-metric", "5-MB-reason", "nul-in-reason",
        "100-kB-host", "infinite-provenance"])
def test_ingest_refuses_what_no_backend_should_store(measured, storage_url, tmp_path, capsys,
                                                     edit, message):
    _, data = measured
    run_study(study_from_dict(MEASURED_STUDY), storage_url)
    before = load_trials(storage_url, "m")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edit(json.loads(json.dumps(data)))))
    capsys.readouterr()
    assert main(["ingest", str(bad), "--storage", storage_url]) == 2
    assert message in capsys.readouterr().err
    assert load_trials(storage_url, "m").equals(before)


def test_concurrent_ingests_of_one_file_count_what_each_stored(measured, storage_url,
                                                                tmp_path):
    _, data = measured
    run_study(study_from_dict(MEASURED_STUDY), storage_url)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    stores = [open_store(storage_url, existing=True) for _ in range(2)]
    start, added = threading.Barrier(2), []

    def ingest_once(store):
        start.wait()  # both transactions at once: each may find the other's rows half-written
        added.append(ingest(store, path, read_results(path)))

    threads = [threading.Thread(target=ingest_once, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results = len(data["results"])
    assert sorted(a["evaluations"] for a in added) == [0, results]
    assert sorted(a["trials"] for a in added) == [0, results]
    frame = load_trials(storage_url, "m")
    assert (frame["evaluator"] == "cpu").sum() == results


def test_ingest_skips_an_exact_repeat(measured, tmp_path, capsys):
    storage, data = measured
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({**data, "results": [*data["results"], data["results"][0]]}))
    assert main(["ingest", str(twice), "--storage", storage]) == 0
    assert "4 results: 3 new evaluations, 3 new trials" in capsys.readouterr().out


def test_ingest_keeps_a_stored_result_and_says_so(measured, tmp_path, capsys):
    storage, data = measured
    copy = tmp_path / "copy.db"
    with sqlite3.connect(storage) as source, sqlite3.connect(copy) as target:
        source.backup(target)  # the study's database, with what its WAL file holds
    first = tmp_path / "first.json"
    first.write_text(json.dumps(data))
    assert main(["ingest", str(first), "--storage", str(copy)]) == 0
    again = tmp_path / "again.json"
    failed = {**data["results"][0], "status": "failed", "reason": "no GPU", "metrics": {}}
    again.write_text(json.dumps({**data, "results": [failed]}))
    capsys.readouterr()
    assert main(["ingest", str(again), "--storage", str(copy)]) == 0
    captured = capsys.readouterr()
    assert "1 results: 0 new evaluations, 0 new trials" in captured.out
    assert "1 results differ in status from the stored ones, which are kept" in captured.err
    assert (load_trials(str(copy), "m")["status"] == "ok").all()


def test_bad_results_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    assert main(["ingest", str(bad), "--storage", str(tmp_path / "r.db")]) == 2
    assert "not a dse results file" in capsys.readouterr().err


def _python_configs(path: Path, items: list[tuple[str, float]], extra: str = "",
                    first: str = "", on_crash: str = "") -> None:
    """A configs file of python jobs: ``measure(values)`` runs ``first`` (source lines), then
    sleeps ``value`` seconds a config; a negative value runs ``on_crash`` and kills its
    process; ``extra`` is more of the module's source."""
    source = extra + ("import os, time\n"
                      "def measure(values):\n" + first +
                      "    if min(values) < 0:\n" + on_crash +
                      "        os._exit(3)\n"
                      "    time.sleep(sum(values))\n"
                      "    return [{'status': 'ok', 'metrics': {'latency_s': v, "
                      "'calls': len(values), 'pid': os.getpid()}} for v in values]\n")
    configs = [{"id": f"{workload}-{value}", "workload": {"shape": workload}, "params": {},
                "job": {"kind": "python", "source": source, "entry": "measure",
                        "batch": "values", "args": {"values": [value]}}}
               for workload, value in items]
    path.write_text(json.dumps({"format": "dse-configs/1", "study": "s", "target": "cpu",
                                "evaluator": {"name": "x"}, "configs": configs}))


def test_runner_batches_python_jobs_and_survives_a_crash(tmp_path):
    """Neighbouring python jobs of one workload run as one call, in a child process: a call
    whose process dies is measured again in halves, so only the config at fault fails, and
    the next call runs."""
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    _python_configs(configs, [("a", 0.0), ("a", 0.01), ("b", -1.0), ("b", 0.0), ("c", 0.0)])
    done = subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "[3-4/5]" in done.stderr, done.stderr
    assert "measuring them again in halves" in done.stderr
    kept = json.loads(results.read_text())["results"]
    assert [(r["id"], r["status"]) for r in kept] == [
        ("a-0.0", "ok"), ("a-0.01", "ok"), ("b--1.0", "failed"), ("b-0.0", "ok"),
        ("c-0.0", "ok")]
    assert kept[0]["metrics"]["calls"] == 2 and "died" in kept[2]["reason"]
    assert kept[0]["metrics"]["pid"] != kept[4]["metrics"]["pid"]  # a fresh child a call


def test_runner_stops_when_the_machine_cannot_run_the_jobs(tmp_path):
    """A job module's preflight runs once before anything is measured: when it fails, the
    runner exits 2 saying why, and no config is recorded as failed."""
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    _python_configs(configs, [("a", 0.0), ("b", 0.0)],
                    extra="def preflight(job):\n    raise RuntimeError('no GPU here')\n")
    done = subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "cannot run these jobs: RuntimeError: no GPU here" in \
        done.stderr, done.stderr
    assert json.loads(results.read_text())["results"] == []


def test_runner_leaves_out_a_call_whose_entry_raises(tmp_path):
    """An entry that raises is no config's fault: its configs are left unmeasured (exported
    again later), the other calls run, and the exit status says so."""
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    _python_configs(configs, [("a", 0.0), ("b", 0.5), ("b", 0.0), ("c", 0.0)],
                    first="    if 0.5 in values:\n"
                          "        raise MemoryError('out of GPU memory')\n")
    done = subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "MemoryError: out of GPU memory" in done.stderr
    assert [r["id"] for r in json.loads(results.read_text())["results"]] == ["a-0.0", "c-0.0"]
    assert "2 of 4 configs not measured" in done.stderr


def test_runner_stops_when_the_machine_is_lost_mid_run(tmp_path):
    """A call dies and, measured alone, its config dies again; if the machine's preflight now
    fails too (a GPU gone), the config is not blamed: the runner stops with exit 2."""
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    marker = str(tmp_path / "gone")
    _python_configs(configs, [("a", 0.0), ("b", -1.0), ("c", 0.0)], extra=(
        "import os as _os\n"
        f"def preflight(job):\n    if _os.path.exists({marker!r}):\n"
        "        raise RuntimeError('the GPU fell off the bus')\n"),
        on_crash=f"        open({marker!r}, 'w').close()\n")
    done = subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "stopped running these jobs" in done.stderr
    assert "the GPU fell off the bus" in done.stderr
    assert [r["id"] for r in json.loads(results.read_text())["results"]] == ["a-0.0"]


def test_runner_refuses_a_bad_configs_file_or_results_path_before_measuring(tmp_path):
    configs = tmp_path / "configs.json"
    _python_configs(configs, [("a", 0.0)])
    for args, message in (([str(configs), str(tmp_path / "nowhere" / "r.json")],
                           "no such directory"),
                          ([str(tmp_path / "absent.json"), str(tmp_path / "r.json")],
                           "cannot read the configs file"),
                          ([str(RUNNER), str(tmp_path / "r.json")], "cannot read")):
        done = subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True,
                              text=True)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    (tmp_path / "list.json").write_text("[1, 2]")
    done = subprocess.run([sys.executable, str(RUNNER), str(tmp_path / "list.json"),
                           str(tmp_path / "r.json")], capture_output=True, text=True)
    assert done.returncode == 2 and "not a configs file" in done.stderr


def test_runner_cut_short_keeps_what_finished(tmp_path):
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    _python_configs(configs, [("a", 0.0), ("b", 60.0)])
    runner = subprocess.Popen([sys.executable, str(RUNNER), str(configs), str(results)],
                              stderr=subprocess.PIPE, start_new_session=True)
    try:  # kill it (and its child) once the first call's results are written
        deadline = time.monotonic() + 60
        while not results.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
    kept = json.loads(results.read_text())["results"]
    assert [(r["id"], r["status"]) for r in kept] == [("a-0.0", "ok")]


def test_runner_time_limit_leaves_out_what_it_had_no_time_for(tmp_path):
    """No call starts after the limit, and a python job stops measuring at the deadline it is
    given: the results hold a prefix of the configs, the rest to be exported again."""
    source = ("import os, time\n"
              "def measure(values):\n"
              "    deadline = float(os.environ.get('DSE_RUNNER_DEADLINE', 'inf'))\n"
              "    out = []\n"
              "    for v in values:\n"
              "        if time.time() >= deadline:\n"
              "            out.append({'status': 'skipped', 'reason': 'the time limit'})\n"
              "            continue\n"
              "        time.sleep(v)\n"
              "        out.append({'status': 'ok', 'metrics': {'latency_s': v}})\n"
              "    return out\n")
    items = [("a", 1.5), ("a", 1.51), ("a", 1.52), ("b", 0.0)]
    configs = [{"id": f"{w}-{v}", "workload": {"shape": w}, "params": {},
                "job": {"kind": "python", "source": source, "entry": "measure",
                        "batch": "values", "args": {"values": [v]}}} for w, v in items]
    path, results = tmp_path / "configs.json", tmp_path / "results.json"
    path.write_text(json.dumps({"format": "dse-configs/1", "study": "s", "target": "cpu",
                                "evaluator": {"name": "x"}, "configs": configs}))
    done = subprocess.run([sys.executable, str(RUNNER), str(path), str(results),
                           "--time-limit", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kept = [r["id"] for r in json.loads(results.read_text())["results"]]
    assert len(kept) <= 2 and kept == ["a-1.5", "a-1.51"][:len(kept)]
    assert f"{4 - len(kept)} of 4 configs not measured" in done.stderr
    bad = subprocess.run([sys.executable, str(RUNNER), str(path), str(results), "--time-limit",
                          "soon"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--time-limit" in bad.stderr


def test_ingest_keeps_the_study_constants_when_the_target_file_changed(tmp_path, capsys):
    from sqlalchemy import select

    from dse.core.registry import target_path
    from dse.storage import ResultStore
    from dse.storage import models as m

    target = tmp_path / "mycpu.toml"
    target.write_text(target_path("cpu").read_text())
    storage = str(tmp_path / "r.db")
    run_study(study_from_dict({
        "name": "mine", "target": str(target), "sampler": "exhaustive",
        "workload": {"shape": "128x128x128", "dtype": "fp32-fp32"}}), storage)
    configs, results = tmp_path / "configs.json", tmp_path / "results.json"
    assert main(["export-configs", "mine", "--top", "2", "--out", str(configs),
                 "--storage", storage]) == 0
    subprocess.run([sys.executable, str(RUNNER), str(configs), str(results)], check=True,
                   capture_output=True)
    target.write_text(target.read_text().replace("call_s = 5.0e-6", "call_s = 9.0e-6"))
    assert main(["ingest", str(results), "--storage", storage]) == 0
    with ResultStore(storage).session() as s:
        assert len(s.scalars(select(m.EvaluationRow.target_id).distinct()).all()) == 1


def test_the_runner_names_a_configs_file_of_an_older_dse(tmp_path):
    path, results = tmp_path / "configs.json", tmp_path / "results.json"
    path.write_text(json.dumps({"format": "dse-configs/1", "study": "s", "target": "cpu",
                                "evaluator": {"name": "cpu"}, "configs": [
                                    {"id": "x", "workload": {}, "params": {},
                                     "job": {"kind": "cpu", "M": 16}}]}))
    done = subprocess.run([sys.executable, str(RUNNER), str(path), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "written by an older dse" in done.stderr
