"""What messages say about a database: where it is, as a person reads it, and what to do about
one that cannot be used."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sqlalchemy.engine import URL, make_url

# PostgreSQL's own words when the server is up but the database named in the URL is not there
_MISSING_DATABASE = re.compile(r'database "([^"]+)" does not exist')


def missing_database_hint(url: URL, problem: str) -> str:
    """``; create it with `createdb ...``` when ``problem`` (the server's message) says the
    PostgreSQL database of ``url`` does not exist: dse creates its tables, not the database,
    which needs the server's own rights. Empty for any other problem."""
    missing = _MISSING_DATABASE.search(problem)
    if url.get_backend_name() != "postgresql" or not missing:
        return ""
    flags = [f"{flag} {shlex.quote(str(value))}" for flag, value in
             (("-h", url.host), ("-p", url.port), ("-U", url.username)) if value]
    return (f"; create it with `createdb {' '.join([*flags, shlex.quote(missing.group(1))])}`, "
            "then run again (dse creates its tables in it)")


def shown_storage(url: str | URL) -> str:
    """A storage URL as messages and pages show it: a SQLite file as its absolute path (a
    read-only store's engine is a bare ``sqlite://`` that names no file), any other database
    as its URL without the password."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and not parsed.query \
            and parsed.database != ":memory:" and not parsed.database.startswith("file:"):
        return str(Path(parsed.database).expanduser().absolute())
    # as given where there is no password to hide (SQLAlchemy's rendering escapes ':')
    text = url if isinstance(url, str) and parsed.password is None \
        else parsed.render_as_string(hide_password=True)
    # the driver dse picks is not the user's word
    return re.sub(r"^postgresql\+psycopg://", "postgresql://", text)
