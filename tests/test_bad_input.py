"""Bad input on the command line: a clear message, exit status 2, nothing stored changed."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dse import load_trials
from dse.cli import main
from dse.cli.progress import ProgressBars
from dse.cli.studies import _run_command
from dse.core.registry import target_path
from dse.offline.exchange import RESULTS_FORMAT
from dse.storage import open_store

STUDY = """
name: small
target: {target}
workload: {{shape: 1024x1024x1024, dtype: int8-int8}}
sampler: random
budget: {{trials: 6}}
"""
# one config to evaluate: an xdna2 GEMM the stock IRON design could run
EVALUATE = ["evaluate", "--target", "xdna2", "--dtype", "int8-int8", "--shape", "4096x4096x4096",
            "--param", "m_ct=64", "--param", "k_ct=64", "--param", "n_ct=64", "--param",
            "k_mt=64"]


@pytest.fixture
def study(tmp_path, capsys):
    """A finished 6-trial study in a fresh SQLite file: (study file, storage)."""
    path = tmp_path / "small.yaml"
    path.write_text(textwrap.dedent(STUDY.format(target="xdna2")))
    storage = str(tmp_path / "r.db")
    assert main(["run", str(path), "--storage", storage]) == 0
    capsys.readouterr()
    return path, storage


def _refused(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["studies", "--storage", ""], "storage is empty"),
    (["studies", "--storage", "mysql://me@127.0.0.1/test"], "no driver for 'mysql'"),
    (["studies", "--storage", "foo://bar"], "no driver for 'foo'"),
    (["run", "x.yaml", "--trials", "0"], "argument --trials: expected 1 to 100,000,000 trials a "
     "workload, got 0"),
    (["run", "x.yaml", "--workers", "-1"], "argument --workers: expected 1 to 4,096 workers, "
     "got -1"),
    (["search", "--target", "xdna2", "--dtype", "int8-int8", "--shape", "64x64x64",
      "--k-mt", "-5"], "argument --k-mt: must be at least 1"),
    (["ascend", "sweep", "--points", "0"], "argument --points: must be at least 1"),
    (["dashboard", "--port", "99999"], "--port: must be 0 (any free port) to 65535"),
])
def test_bad_options_exit_2(capsys, argv, message):
    _refused(capsys, argv, message)


def test_queries_create_no_database_at_a_mistyped_path(tmp_path, capsys):
    typo = tmp_path / "typo.db"
    for command in (["studies"], ["best", "small"], ["trials", "small"],
                    ["report", "small", "--out", str(tmp_path / "r.html")]):
        _refused(capsys, [*command, "--storage", str(typo)], f"no database at {typo}")
    assert not typo.exists()
    foreign = tmp_path / "other.db"
    foreign.write_bytes(b"")
    _refused(capsys, ["studies", "--storage", str(foreign)], "holds no dse results")
    assert foreign.read_bytes() == b""


FOREIGN_TABLES = {
    "its own tables": "create table notes(id integer primary key, body text);"
                      "insert into notes(body) values ('mine');",
    "a table dse names": "create table notes(id integer primary key, body text);"
                         "create table dse_studies(x int);",
    "only a table dse names": "create table dse_studies(x int);",
}


@pytest.mark.parametrize("tables", FOREIGN_TABLES.values(), ids=FOREIGN_TABLES)
def test_another_applications_database_is_refused_and_left_unchanged(study, tmp_path, capsys,
                                                                     tables):
    study_file, _ = study
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.executescript(tables)
    before = foreign.read_bytes()
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"format": RESULTS_FORMAT, "study": "small",
                                   "evaluator": {"name": "analytical"}, "results": []}))
    _refused(capsys, ["run", str(study_file), "--storage", str(foreign)],
             f"{foreign} is not a dse results database")
    for command in (["studies"], ["trials", "small"], ["ingest", str(results)]):
        _refused(capsys, [*command, "--storage", str(foreign)],
                 f"{foreign} holds no dse results")
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("other.db*")) == ["other.db"]


def test_a_store_shared_with_other_tables_is_still_written(study, capsys):
    study_file, storage = study
    with sqlite3.connect(storage) as conn:  # another application's table beside dse's
        conn.execute("create table notes(id integer primary key, body text)")
    assert main(["run", str(study_file), "--storage", storage, "--trials", "8"]) == 0
    assert len(load_trials(storage, "small")) == 8


def test_paths_that_cannot_be_written_exit_2(study, tmp_path, capsys):
    _, storage = study
    missing = tmp_path / "no" / "such" / "dir"
    _refused(capsys, ["trials", "small", "--storage", storage, "--format", "csv", "--out",
                      str(missing / "t.csv")], "No such file or directory")
    _refused(capsys, ["report", "small", "--storage", storage, "--out", str(tmp_path)],
             "Is a directory")


def test_a_study_file_with_a_repeated_key_is_refused(tmp_path, capsys):
    path = tmp_path / "twice.yaml"
    path.write_text(textwrap.dedent(STUDY.format(target="xdna2")) + "name: other\n")
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
             "key 'name' is given twice")


def test_an_edited_target_file_does_not_join_the_study_it_began(tmp_path, capsys):
    target = tmp_path / "mine.toml"
    target.write_text(target_path("xdna2").read_text())
    path = tmp_path / "mine.yaml"
    path.write_text(textwrap.dedent(STUDY.format(target="mine.toml")))
    storage = str(tmp_path / "r.db")
    assert main(["run", str(path), "--storage", storage]) == 0
    before = load_trials(storage, "small")
    target.write_text(target.read_text().replace("clock_hz = 1.8e9", "clock_hz = 2.0e9"))
    _refused(capsys, ["run", str(path), "--storage", storage, "--trials", "12"],
             "with other constants for target")
    assert load_trials(storage, "small").equals(before)


def test_export_for_an_evaluator_of_another_target_exits_2(study, tmp_path, capsys):
    _, storage = study
    out = ["--storage", storage, "--out", str(tmp_path / "c.json")]
    # the message names the evaluator that fits, and without --evaluator that one is used
    _refused(capsys, ["export-configs", "small", *out, "--evaluator", "cpu"],
             "--evaluator cpu: measures cpu_gemm configs, not xdna_gemm ones (target xdna2); "
             "for this study use --evaluator iron")
    _refused(capsys, ["export-configs", "small", *out, "--evaluator", "simulator"],
             "--evaluator simulator: does not measure offline (target xdna2); for this study "
             "use --evaluator iron")
    _refused(capsys, ["export-configs", "small", *out], "evaluator 'iron': give mlir_aie_dir")


def test_search_with_nothing_feasible_says_so(capsys):
    assert main(["search", "--target", "xdna2", "--dtype", "int8-int8", "--shape",
                 "1024x1024x1024", "--fix", "m_ct=33"]) == 1
    assert "no configuration is feasible" in capsys.readouterr().out


def test_resume_hint_repeats_the_options_given():
    args = argparse.Namespace(study="my study.yaml", storage="postgresql://me@db/x", trials=40,
                              workers=None, ray_address=None, offline=None)
    assert _run_command(args) == ("dse run 'my study.yaml' --storage postgresql://me@db/x "
                                  "--trials 40")


def test_progress_keeps_the_best_in_the_objective_direction():
    progress = ProgressBars()
    for value in (0.5, 0.2, 0.9):
        progress("w", 1, 3, value, "minimize")
    for value in (0.5, 0.2, 0.9):
        progress("v", 1, 3, value, "maximize")
    progress.close()
    assert progress._best == {"w": 0.2, "v": 0.9}


def test_an_empty_storage_is_refused_by_run_too(study, capsys):
    path, _ = study
    _refused(capsys, ["run", str(path), "--storage", ""], "storage is empty")


def test_read_only_sqlite_uri_is_a_database(study, capsys):
    _, storage = study
    assert main(["studies", "--storage", f"sqlite:///file:{storage}?mode=ro&uri=true"]) == 0
    assert "small" in capsys.readouterr().out


@pytest.mark.parametrize(("storage", "message"), [
    ("file:nothere.db?mode=ro", "no database at file:nothere.db?mode=ro"),
    ("nothere.db#1", "no database at nothere.db#1"),
    ("sqlite:///file:nothere.db?mode=rwc&uri=true", "unable to open database file"),
    ("sqlite:///nothere.db?timeout=5", "no database at nothere.db"),
])
def test_a_query_creates_no_file_whatever_the_storage_says(tmp_path, monkeypatch, capsys,
                                                           recwarn, storage, message):
    monkeypatch.chdir(tmp_path)
    for command in (["studies"], ["trials", "small"]):
        _refused(capsys, [*command, "--storage", storage], message)
    assert list(tmp_path.iterdir()) == []
    assert not [w for w in recwarn if "SAWarning" in w.category.__name__]


def test_a_query_by_uri_or_with_driver_options_writes_nothing(study, capsys):
    _, written = study
    storage = str(Path(written).with_name("copy.db"))
    with contextlib.closing(sqlite3.connect(written)) as source, \
            contextlib.closing(sqlite3.connect(storage)) as copy:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")  # opened for writing, it is set to WAL
    before = {p.name: p.read_bytes() for p in Path(storage).parent.glob("copy.db*")}
    for url in (f"sqlite:///file:{storage}?mode=rwc&uri=true", f"sqlite:///{storage}?timeout=5"):
        assert main(["studies", "--storage", url]) == 0
        assert "small" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in Path(storage).parent.glob("copy.db*")} == before


def test_a_sqlite_option_the_driver_would_ignore_or_cannot_read_is_refused(study, tmp_path,
                                                                          capsys):
    path, storage = study
    for option, message in (("mode=ro", "SQLite takes no option mode (its options: timeout"),
                            ("timeout=abc", "could not convert string to float: 'abc'")):
        _refused(capsys, ["studies", "--storage", f"sqlite:///{storage}?{option}"], message)
        _refused(capsys, ["run", str(path), "--storage",
                          f"sqlite:///{tmp_path / 'new.db'}?{option}"], message)
    assert not (tmp_path / "new.db").exists()


def test_an_option_given_twice_is_refused(capsys):
    _refused(capsys, [*EVALUATE, "--option", "a=1", "--option", "a=2"],
             "--option a is given twice")


def test_a_study_file_may_merge_yaml_anchors(tmp_path, capsys):
    path = tmp_path / "anchors.yaml"
    path.write_text(textwrap.dedent("""
        name: anchors
        target: xdna2
        workloads:
          - &first {shape: 1024x1024x1024, dtype: int8-int8}
          - {<<: *first, dtype: int8-int16}
        budget: {trials: 2}
        """))
    storage = str(tmp_path / "r.db")
    assert main(["run", str(path), "--storage", storage]) == 0
    assert set(load_trials(storage, "anchors")["dtype"]) == {"int8-int8", "int8-int16"}


def test_files_that_are_not_utf8_are_named(tmp_path, capsys):
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("# résumé\n".encode("latin-1") + STUDY.format(target="xdna2").encode())
    _refused(capsys, ["run", str(latin), "--storage", str(tmp_path / "r.db")],
             f"study file {latin}: not UTF-8 text (byte 3 is b'\\xe9')")
    binary = tmp_path / "results.json"
    binary.write_bytes(bytes(range(256)))
    _refused(capsys, ["ingest", str(binary), "--storage", str(tmp_path / "r.db")],
             f"results file {binary}: not UTF-8 text")
    target = tmp_path / "t.toml"
    target.write_bytes(b"\xff\xfe")
    _refused(capsys, ["evaluate", "--target", str(target), "--dtype", "int8-int8", "--shape",
                      "64x64x64"], f"target file {target}: not UTF-8 text")


def test_out_never_overwrites_a_database(study, tmp_path, capsys):
    _, storage = study
    before = load_trials(storage, "small")
    for out in (storage, storage + "-wal"):
        _refused(capsys, ["report", "small", "--storage", storage, "--out", out],
                 f"--out {out} is the results database")
    other = tmp_path / "other.db"
    assert main(["run", str(study[0]), "--storage", str(other)]) == 0
    _refused(capsys, ["trials", "small", "--storage", storage, "--format", "csv", "--out",
                      str(other)], f"--out {other} is a SQLite database")
    assert load_trials(storage, "small").equals(before)
    assert load_trials(str(other), "small").shape[0] == 6


@pytest.fixture
def empty_study(tmp_path):
    """A study stored but with no trial yet (as when stopped before its first): its storage."""
    from dse.core.registry import load_target
    from dse.storage import ResultStore, rows
    from dse.study.spec import study_from_dict

    spec = study_from_dict({"name": "empty", "target": "xdna2", "budget": {"trials": 3},
                            "workload": {"shape": "1024x1024x1024", "dtype": "int8-int8"}})
    storage = str(tmp_path / "empty.db")
    store, target = ResultStore(storage), load_target("xdna2")
    with store.session() as s:
        rows.create_study(s, "empty", spec.identity(),
                          rows.target_id(s, target.digest(), target.name, target.to_dict()))
    return storage


def test_commands_on_a_study_without_trials(empty_study, tmp_path, capsys):
    _refused(capsys, ["balance", "empty", "--storage", empty_study], "has no trials yet")
    _refused(capsys, ["export-configs", "empty", "--storage", empty_study, "--out",
                      str(tmp_path / "c.json"), "--evaluator", "cpu"],
             "--evaluator cpu: measures cpu_gemm configs, not xdna_gemm ones")
    assert not (tmp_path / "c.json").exists()


def test_ascend_commands_check_dtype_and_sizes(capsys):
    _refused(capsys, ["ascend", "classify", "--shape", "8x2048x1024x2048", "--dtype", "int8"],
             "dtype 'int8-int8' is not supported on ascend-950pr")
    _refused(capsys, ["ascend", "sweep", "--points", "100000"], "--points must be at most 200")


def test_trials_is_refused_for_a_ladder_study(tmp_path, capsys):
    path = tmp_path / "ladder.yaml"
    path.write_text(textwrap.dedent("""
        name: lad
        target: xdna2
        workload: {shape: 1024x1024x1024, dtype: int8-int8}
        ladder: [{evaluator: analytical, keep: 3}, {evaluator: simulator}]
        """))
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db"), "--trials", "8"],
             "--trials sets a sampler's budget; a ladder's rungs have their own")


def test_calibrate_names_a_bad_against(study, capsys):
    _, storage = study
    _refused(capsys, ["calibrate", "small", "--storage", storage, "--against", "nonexist"],
             "--against: unknown evaluator 'nonexist'; valid: amx, analytical")
    _refused(capsys, ["calibrate", "small", "--storage", storage, "--against", "analytical"],
             "not its own")


def test_an_iron_rung_without_its_checkout_is_refused_before_anything_runs(tmp_path, capsys):
    path = tmp_path / "npu.yaml"
    path.write_text(textwrap.dedent("""
        name: npu
        target: xdna2
        workload: {shape: 4096x4096x4096, dtype: int8-int8}
        space:
          fix: {buf_a_l1: 2, buf_b_l1: 2, buf_c_l1: 2, buf_a_l2: 2, buf_b_l2: 2, buf_c_l2: 2}
          constraints: [no_padding]
        ladder:
          - {evaluator: analytical, keep: 3}
          - {evaluator: iron, options: {mlir_aie_dir: /nonexistent/mlir-aie}}
        """))
    storage = tmp_path / "r.db"
    _refused(capsys, ["run", str(path), "--storage", str(storage)],
             "/nonexistent/mlir-aie/programming_examples")
    assert open_store(str(storage)).list_studies().empty  # refused before the study was stored
    _refused(capsys, [*EVALUATE, "--evaluator", "iron", "--option",
                      "mlir_aie_dir=/nonexistent/mlir-aie"], "cannot run here")


def test_ctrl_c_outside_a_study_run_ends_quietly(tmp_path):
    """Ctrl-C in a long command (here a tiny-block GEMM measured on this CPU, half a minute)
    exits 130, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "dse.cli", "evaluate", "--target", "cpu",
                             "--dtype", "fp32-fp32", "--shape", "2048x2048x2048",
                             "--evaluator", "cpu", "--param", "mc=16", "--param", "kc=16",
                             "--param", "nc=16"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # past the imports: in the measurement, which takes half a minute
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err


def test_a_workload_s_bar_closes_when_its_trials_are_done(tmp_path):
    # Its elapsed time and rate stop there, not when the whole study ends.
    import io

    from dse.study.runner import CHECKING, run_study
    from dse.study.spec import study_from_dict
    from tests.study_helpers import TWO_WORKLOADS

    out = io.StringIO()
    bars = ProgressBars(file=out, enabled=True)
    seen: list[tuple[str, bool]] = []

    def progress(label, done, total, *rest):
        seen.append((label, all(bars.finished(w) for w, _ in seen if w != label)))
        bars(label, done, total, *rest)

    run_study(study_from_dict(TWO_WORKLOADS), str(tmp_path / "r.db"), progress=progress)
    checking, first, second = dict.fromkeys(label for label, _ in seen)
    assert checking == CHECKING and bars.finished(checking)  # before the first trial
    assert bars.finished(first) and bars.finished(second)
    # the second workload's updates all came after the first's bar was closed
    assert all(finished for label, finished in seen if label == second)
    assert f"{first}: 100%" in out.getvalue() and "60/60" in out.getvalue()
    bars.close()  # closing again at the end leaves the finished bars alone
