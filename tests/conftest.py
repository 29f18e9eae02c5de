"""Shared fixtures."""

from __future__ import annotations

import pytest

from dse.core.registry import build_context, build_evaluator


@pytest.fixture(scope="session")
def analytical():
    return build_evaluator("analytical")


@pytest.fixture
def make_ctx():
    return build_context


POSTGRES_ENV = "DSE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_server():
    """URL of the PostgreSQL server .ci/run provides (skipped when it is not set)."""
    import os

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set: no PostgreSQL server to test against "
                    "(.ci/run sets it)")
    return url


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from dse.storage import normalise_url

    server = make_url(normalise_url(postgres_server))
    name = f"dse_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield server.set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request, tmp_path):
    """Each storage backend in turn: a SQLite file, and PostgreSQL when available."""
    if request.param == "sqlite":
        return str(tmp_path / "results.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="session")
def chromium_path():
    """Chromium for the browser tests: ``$DSE_CHROMIUM``, one on the PATH, or Debian's package
    installed here. Skipped (failed under CI, where the browser tests must run) without one."""
    import os

    from tests.browser import find_chromium, install_debian_chromium

    path = find_chromium()
    if path is None:
        problem = install_debian_chromium()
        path = find_chromium()
        if path is None:
            problem = problem or "not found after installing"
            message = (f"no Chromium for the browser tests ({problem}); install Debian's "
                       "chromium package or set DSE_CHROMIUM")
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
    return path
