"""Hostile-but-fair input: values past the limit table, YAML built to exhaust the parser or the
memory, damaged and read-only databases. Each is refused with a message and exit status 2
(never a traceback), or read without writing, and nothing stored changes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from dse.cli import main
from dse.core import limits

SMALL = """
name: {name}
target: xdna2
workload: {{shape: {shape}, dtype: int8-int8}}
sampler: {sampler}
budget: {{trials: {trials}}}
"""


def _study(tmp_path: Path, extra: str = "", **fields: object) -> Path:
    values = {"name": "h", "shape": "512x512x512", "sampler": "random", "trials": 4, **fields}
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(SMALL.format(**values)) + extra)
    return path


def _refused(capsys, argv: list[str], message: str) -> str:
    """Run ``argv``: exit status 2, ``message`` in a short error, no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err and len(err.splitlines()) <= 6, err
    return err


def _digest(path: str) -> str:
    """A digest of every dse table's rows (what a refused command must leave unchanged)."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'dse_%' "
            "ORDER BY name")]
        text = repr([(t, conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
                     for t in tables])
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def stored(tmp_path, capsys):
    """A SQLite file holding one finished study: its path."""
    storage = str(tmp_path / "kept.db")
    assert main(["run", str(_study(tmp_path, name="kept")), "--storage", storage]) == 0
    capsys.readouterr()
    return storage


@pytest.mark.parametrize(("fields", "extra", "message"), [
    ({}, "seed: 18446744073709551616\n", "key 'seed': 18446744073709551616 is not valid; "
     "expected 0 to 4,294,967,295"),
    ({}, "workers: 1000000000000000000000000000000\n", "key 'workers'"),
    ({}, "batch_size: 1000000000\n", "key 'batch_size': 1000000000 is not valid; expected 1 "
     "to 100,000 configs a round"),
    ({"trials": 2**63}, "", "key 'budget.trials': 9223372036854775808 is not valid"),
    ({"sampler": "{name: tpe, options: {n_startup_trials: -1}}"}, "",
     "sampler 'tpe': option n_startup_trials: -1 is not valid; expected 0 to"),
    ({"sampler": "{name: cmaes, options: {sigma0: -1}}"}, "",
     "sampler 'cmaes': option sigma0: -1 is not valid"),
    ({"shape": "\u0665\u0661\u0662x512x512"}, "", "is not of the form MxKxN"),
    ({"name": '"a\\0b"'}, "", "a NUL character (\\0) is not allowed"),
    ({"name": "../../etc/passwd"}, "", "may not hold '/'"),
    ({"name": "x" * 100_000}, "", "at most 10,000 characters"),
    ({"name": "x" * (limits.NAME_CHARS + 1)}, "", "holds at most 200 characters, not 201"),
    ({}, "evaluator: {name: synthetic, options: {work_s: 1.0e+308}}\n",
     "evaluator 'synthetic': work_s: 1e+308 is not valid; expected 0 to 3,600 seconds"),
], ids=["seed", "workers", "batch", "trials", "tpe", "cmaes", "digits", "nul", "path", "long",
        "column", "work"])
def test_values_past_the_limit_table_are_refused(tmp_path, capsys, stored, fields, extra,
                                                 message):
    before = _digest(stored)
    _refused(capsys, ["run", str(_study(tmp_path, extra, **fields)), "--storage", stored],
             message)
    assert _digest(stored) == before


@pytest.mark.parametrize(("name", "message"), [
    ("n" * 201, "holds at most 200 characters"), ('"a\\0b"', "a NUL character")])
def test_names_a_column_cannot_hold_are_refused_on_each_backend(tmp_path, capsys, storage_url,
                                                                name, message):
    # PostgreSQL answered these with StringDataRightTruncation and a NUL ValueError
    _refused(capsys, ["run", str(_study(tmp_path, name=name)), "--storage", storage_url],
             message)
    assert main(["studies", "--storage", storage_url]) in (0, 2)  # nothing half-created
    assert name.strip('"') not in capsys.readouterr().out


def test_a_nul_in_any_text_of_a_study_file_is_refused(tmp_path, capsys):
    path = _study(tmp_path, 'space: {constraints: ["dma_bound\\0"]}\n')
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
             "a NUL character")


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_yaml_nested_past_the_depth_limit_is_refused(tmp_path, capsys, opening):
    closing = "]" if opening == "[" else "}"
    path = _study(tmp_path, f"deep: {opening * 1200}1{closing * 1200}\n")
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
             f"nested more than {limits.YAML_DEPTH} deep")


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path, capsys):
    lines = ['  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("defs:\n" + "\n".join(lines) + "\n"
                    + SMALL.format(name="*a9", shape="512x512x512", sampler="random",
                                   trials=4))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
                 "aliases expand to more than 100,000 values")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 10 and peak < 50e6  # 9**9 "lol"s were never built


def test_a_grid_of_too_many_workloads_is_refused(tmp_path, capsys):
    shapes = ", ".join(f"{64 * i}x512x512" for i in range(1, 252))
    path = tmp_path / "grid.yaml"
    path.write_text(f"name: g\ntarget: xdna2\nworkloads: {{grid: {{shape: [{shapes}], dtype: "
                    "[int8-int8, int8-int16, bf16-bf16, int8-int32]}}\nbudget: {trials: 2}\n")
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
             "1,004 workloads; a study holds at most 1,000")


def test_many_workloads_say_what_runs_before_the_first_trial(tmp_path, capsys):
    shapes = ", ".join(f"{64 * i}x512x512" for i in range(1, 27))
    path = tmp_path / "grid.yaml"
    path.write_text(f"name: g\ntarget: xdna2\nworkloads: {{grid: {{shape: [{shapes}], dtype: "
                    "[int8-int8, int8-int16]}}\nbudget: {trials: 1}\n")
    assert main(["run", str(path), "--storage", str(tmp_path / "r.db")]) == 0
    assert "checking the spaces of 52 workloads before the first trial" in \
        capsys.readouterr().err


@pytest.mark.parametrize("url", ["foo://::::", "postgresql://postgres@127.0.0.1:abc/db"])
def test_a_storage_url_with_a_bad_port_is_refused(capsys, url):
    _refused(capsys, ["studies", "--storage", url], "its port is not a number")


def test_cli_numbers_take_ascii_digits_within_the_limits(capsys):
    _refused(capsys, ["run", "x.yaml", "--trials", "\u0665"], "is not an integer")
    _refused(capsys, ["trials", "s", "--limit", "10000000"], "expected 1 to 1,000,000 rows")


def _page_size(path: str) -> int:
    return sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]


def _zero_pages(path: str, first: int, count: int) -> None:
    """Overwrite ``count`` pages of a SQLite file from page ``first`` with zeros."""
    size = _page_size(path)
    with open(path, "r+b") as handle:
        handle.seek(first * size)
        handle.write(b"\0" * size * count)


def _checkpointed(storage: str) -> None:
    """Move the WAL's pages into the file (as closing the last connection does)."""
    with sqlite3.connect(storage) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_a_damaged_file_is_refused_and_left_as_it_was(stored, tmp_path, capsys):
    _checkpointed(stored)
    pages = os.path.getsize(stored) // _page_size(stored)
    _zero_pages(stored, pages // 2, 3)
    before = Path(stored).read_bytes()
    _refused(capsys, ["run", str(_study(tmp_path, name="new")), "--storage", stored],
             "is damaged")
    err = _refused(capsys, ["run", str(_study(tmp_path, name="kept")), "--storage", stored],
                   "dse writes nothing into it")
    assert ".recover" in err
    assert Path(stored).read_bytes() == before


def test_random_bytes_in_the_middle_are_found_by_the_check(stored, tmp_path, capsys):
    _checkpointed(stored)
    data = bytearray(Path(stored).read_bytes())
    size = _page_size(stored)
    middle = len(data) // 2 // size * size
    data[middle:middle + 2000] = os.urandom(2000)
    Path(stored).write_bytes(bytes(data))
    _refused(capsys, ["run", str(_study(tmp_path, name="new")), "--storage", stored],
             "is damaged")


def test_reading_a_damaged_file_says_so(stored, capsys):
    _checkpointed(stored)
    _zero_pages(stored, 1, os.path.getsize(stored) // _page_size(stored) - 1)  # all but the first
    assert main(["best", "kept", "--storage", stored]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("is damaged" in err or "cannot read" in err), err


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    """``dse ARGV`` run as the user nobody (as root, permissions would not apply)."""
    prefix = [] if os.geteuid() else ["setpriv", "--reuid=65534", "--regid=65534",
                                      "--clear-groups"]
    return subprocess.run([*prefix, sys.executable, "-m", "dse.cli", *argv], capture_output=True,
                          text=True, timeout=120, cwd="/",
                          env={**os.environ, "HOME": "/tmp", "PYTHONPATH": str(Path.cwd())})


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"),
                    reason="as root the test needs setpriv to read as another user")
def test_a_database_in_a_folder_one_cannot_write_is_read(stored):
    _checkpointed(stored)
    # outside pytest's own folders, which only their owner may enter
    outer = Path(tempfile.mkdtemp(prefix="dse-theirs-"))
    folder = outer / "theirs"
    folder.mkdir()
    copy = folder / "results.db"
    shutil.copy(stored, copy)
    for path, mode in ((outer, 0o755), (folder, 0o555), (copy, 0o444)):
        path.chmod(mode)
    before = copy.read_bytes()
    try:
        for command in (["studies"], ["best", "kept"], ["trials", "kept", "--limit", "2"],
                        ["faults", "kept"]):
            done = _as_nobody([*command, "--storage", str(copy)])
            assert done.returncode == 0, done.stderr
            assert "Traceback" not in done.stderr
        assert "kept" in _as_nobody(["studies", "--storage", str(copy)]).stdout
        assert sorted(p.name for p in folder.iterdir()) == ["results.db"]  # no -wal, -shm
        assert copy.read_bytes() == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(outer)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"),
                    reason="as root the test needs setpriv to read as another user")
def test_a_copy_with_its_wal_in_a_folder_one_cannot_write_is_read_whole(stored, tmp_path,
                                                                       capsys):
    _checkpointed(stored)
    # a connection held open keeps the next study's commits in the WAL (the last connection
    # to close would move them into the file), as in a copy taken while dse was running
    with contextlib.closing(sqlite3.connect(stored)) as holder:
        holder.execute("SELECT count(*) FROM dse_studies").fetchall()
        assert main(["run", str(_study(tmp_path, name="late")), "--storage", stored]) == 0
        capsys.readouterr()
        outer = Path(tempfile.mkdtemp(prefix="dse-theirs-"))
        folder = outer / "theirs"
        folder.mkdir()
        copy = folder / "results.db"
        shutil.copy(stored, copy)
        shutil.copy(stored + "-wal", folder / "results.db-wal")  # and no -shm
    assert (folder / "results.db-wal").stat().st_size > 0
    for path, mode in ((outer, 0o755), (folder, 0o555), (copy, 0o444),
                       (folder / "results.db-wal", 0o444)):
        path.chmod(mode)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    try:
        listed = _as_nobody(["studies", "--storage", str(copy)])
        assert listed.returncode == 0, listed.stderr
        assert "kept" in listed.stdout and "late" in listed.stdout, listed.stdout
        best = _as_nobody(["best", "late", "--storage", str(copy)])
        assert best.returncode == 0 and "Traceback" not in best.stderr, best.stderr
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(outer)


FULL_DISK = """
mount -t tmpfs -o size=2m tmpfs "$1" && cd "$1" || exit 99
cp "$2/big.yaml" big.yaml
head -c 3000000 /dev/zero >filler 2>/dev/null  # no room even for a new store's tables
python -m dse.cli run big.yaml --storage new.db >/dev/null 2>"$2/new.err"; echo $? >"$2/new.rc"
rm -f filler new.db*
python -m dse.cli run big.yaml --storage r.db >/dev/null 2>"$2/full.err"; echo $? >"$2/full.rc"
python -m dse.cli studies --storage r.db --json >"$2/kept.json"
mount -o remount,size=64m tmpfs "$1"  # space again
python -m dse.cli run big.yaml --storage r.db --trials 400 >/dev/null 2>"$2/resumed.err"
echo $? >"$2/resumed.rc"
python -m dse.cli studies --storage r.db --json >"$2/after.json"
"""


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare to mount a small tmpfs")
def test_a_full_disk_says_what_was_kept_and_the_run_resumes(tmp_path):
    """On a tmpfs of 2 MiB, mounted for this process alone (a mount namespace of its own; a
    user other than root needs a user namespace too), a study's store fills the disk."""
    (tmp_path / "big.yaml").write_text(textwrap.dedent(SMALL.format(
        name="big", shape="4096x4096x4096", sampler="random", trials=20000)))
    disk = tmp_path / "disk"
    disk.mkdir()
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--mount"]
    done = subprocess.run([*unshare, "--", "sh", "-c", FULL_DISK, "sh", str(disk), str(tmp_path)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                               f"{os.environ['PATH']}", "PYTHONPATH": str(Path.cwd())})
    if done.returncode == 99 or not (tmp_path / "full.rc").exists():
        pytest.skip(f"no small tmpfs can be mounted here: {done.stderr[-300:]}")
    new = (tmp_path / "new.err").read_text()
    assert (tmp_path / "new.rc").read_text().strip() == "1", new
    assert f"the disk of {disk}/new.db is full" in new and "no study was written" in new, new
    full = (tmp_path / "full.err").read_text()
    assert (tmp_path / "full.rc").read_text().strip() == "1", full
    assert "Traceback" not in full, full
    (kept,) = json.loads((tmp_path / "kept.json").read_text())
    assert 0 < kept["trials"] < 20000 and kept["status"] == "failed"
    assert f"{disk}/r.db is full" in full
    assert f"study 'big' keeps its {kept['trials']} trials" in full
    assert "run the same `dse run` again: it resumes from there" in full
    assert (tmp_path / "resumed.rc").read_text().strip() == "0", \
        (tmp_path / "resumed.err").read_text()
    (after,) = json.loads((tmp_path / "after.json").read_text())
    assert after["trials"] == 400 and after["status"] == "finished"


def test_a_target_that_is_not_a_readable_file_is_refused(tmp_path, capsys):
    path = tmp_path / "mem.yaml"
    path.write_text(SMALL.format(name="m", shape="512x512x512", sampler="random", trials=2)
                    .replace("target: xdna2", "target: /proc/self/mem"))
    _refused(capsys, ["run", str(path), "--storage", str(tmp_path / "r.db")],
             "target file /proc/self/mem: cannot be read")
