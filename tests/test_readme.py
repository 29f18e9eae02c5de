"""The README's first steps say what is true: its test command is the one CI runs, the
PostgreSQL tests are enabled by the variable and URL the suite and CI use, and the file it
offers as a part of the suite exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import POSTGRES_ENV

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _commands() -> list[str]:
    return re.findall(r"^```\n(.*?)\n```$", README, re.MULTILINE | re.DOTALL)


def test_the_first_commands_set_up_run_and_test():
    main_job, suite = _commands()[:2]
    assert main_job == ("python3 -m venv .venv && .venv/bin/pip install -q -e . && "
                        ".venv/bin/dse run studies/quick.yaml")
    assert suite in CI.splitlines()  # what CI runs, word for word


def test_the_readme_says_how_long_and_how_to_enable_postgresql():
    head = README.split("---")[0]
    assert "about 40 s" in head and "about 13 minutes" in head
    exported = next(c for c in _commands() if c.startswith("export "))
    name, url = exported.removeprefix("export ").split("=", 1)
    assert name == POSTGRES_ENV
    assert f'{POSTGRES_ENV}="${{{POSTGRES_ENV}:-{url}}}"' in CI  # the server CI provides
    parts = re.findall(r"pytest (tests/\S+?\.py)", head)
    assert parts and all((ROOT / part).is_file() for part in parts), parts
