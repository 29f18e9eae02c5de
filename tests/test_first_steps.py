"""What a new user trips on first: messages that name the file a study is in, the names a typo
looks like, the flag an option is given by, and the PostgreSQL URL or database they meant."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dse.cli import main
from dse.dashboard import create_app
from dse.storage import normalise_url
from dse.storage.hints import shown_storage
from dse.study.runner import run_study
from tests.study_helpers import make_spec, slow_study_file


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    storage = str(tmp_path_factory.mktemp("first") / "results.db")
    run_study(make_spec("quick", budget={"trials": 10}), storage)
    return storage


def test_a_sqlite_store_is_named_by_its_path(store, capsys, monkeypatch):
    path = str(Path(store).absolute())
    monkeypatch.chdir(Path(store).parent)  # the path as a user gives it, relative
    assert main(["best", "quik", "--storage", "results.db"]) == 2
    said = capsys.readouterr().err
    assert f"no study 'quik' in {path} (did you mean 'quick'?)" in said
    assert "sqlite://" not in said
    # the dashboard, which reads through a read-only engine whose own URL names no file
    client = create_app("results.db").test_client()
    index = client.get("/")
    assert f'<span class="storage">{path}</span>' in index.text
    missing = client.get("/study/quik")
    assert missing.status_code == 404
    assert path in missing.text and "did you mean &#39;quick&#39;?" in missing.text
    assert "sqlite://" not in index.text + missing.text


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql+psycopg://me:secret@db.example:5432/results",
     "postgresql://me:***@db.example:5432/results"),
    ("sqlite:///:memory:", "sqlite:///:memory:"),
])
def test_other_stores_are_shown_by_their_url_without_a_password(url, shown):
    assert shown_storage(url) == shown


@pytest.mark.parametrize(("argv", "hint"), [
    (["bset", "quick"], "(did you mean 'best'?)"),
    (["best", "quik", "--storage", "STORE"], "(did you mean 'quick'?)"),
    (["run", "x.yaml", "--trails", "5"], "(did you mean --trials?)"),
    (["evaluate", "--target", "xdan2", "--dtype", "int8-int8", "--shape", "64x64x64"],
     "(did you mean 'xdna2' or 'xdna'?)"),
    (["evaluate", "--target", "xdna2", "--dtype", "int8-int8", "--shape", "64x64x64",
      "--evaluator", "analytcal"], "(did you mean 'analytical'?)"),
])
def test_a_typo_is_answered_with_the_names_it_looks_like(store, capsys, argv, hint):
    assert main([store if a == "STORE" else a for a in argv]) == 2
    assert hint in capsys.readouterr().err


def test_an_abbreviated_option_is_refused_not_guessed(tmp_path, capsys):
    study = slow_study_file(tmp_path, "abbrev", trials=5, work_s=0.0)
    storage = str(tmp_path / "r.db")
    assert main(["run", str(study), "--storage", storage, "--trial", "10"]) == 2
    said = capsys.readouterr().err
    assert "unrecognized arguments: --trial 10 (did you mean --trials?)" in said
    assert "usage: dse run" in said  # the usage of the command given, not of all of dse
    assert not Path(storage).exists()  # nothing ran
    assert main(["best", "x", "--sto", storage]) == 2
    assert "unrecognized arguments: --sto" in capsys.readouterr().err


def test_export_configs_names_the_flag_of_a_missing_option(store, tmp_path, capsys):
    out = tmp_path / "configs.json"
    assert main(["export-configs", "quick", "--storage", store, "--out", str(out)]) == 2
    said = capsys.readouterr().err
    assert "give mlir_aie_dir" in said and "--option mlir_aie_dir=VALUE" in said
    assert not out.exists()


def test_postgres_is_an_alias_of_postgresql():
    assert normalise_url("postgres://me@127.0.0.1:5432/results") == \
        "postgresql+psycopg://me@127.0.0.1:5432/results"


def test_a_postgres_url_opens_the_store(postgres_url, capsys):
    url = postgres_url.replace("postgresql+psycopg://", "postgres://", 1)
    assert url.startswith("postgres://")
    run_study(make_spec("pg", budget={"trials": 3}), url)
    assert main(["best", "pg", "--storage", url, "--top", "1"]) == 0
    assert "m_ct" in capsys.readouterr().out


def test_a_missing_postgres_database_is_answered_with_createdb(postgres_server, tmp_path,
                                                                capsys):
    from sqlalchemy.engine import make_url

    name = f"dse_missing_{uuid.uuid4().hex[:8]}"
    url = make_url(normalise_url(postgres_server)).set(database=name)
    given = url.render_as_string(hide_password=False)
    study = slow_study_file(tmp_path, "pg", trials=2, work_s=0.0)
    for argv in (["studies"], ["run", str(study)]):  # reading, and writing
        assert main([*argv, "--storage", given]) == 2
        said = capsys.readouterr().err
        assert f'database "{name}" does not exist' in said
        assert f"create it with `createdb -h {url.host}" in said and f" {name}`" in said
        assert "postgresql+psycopg" not in said
