"""``dse dashboard`` in a child process, for the tests that drive the real server (in Chromium,
or over plain HTTP)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

LAUNCH = "from dse.cli import main; raise SystemExit(main())"


@contextlib.contextmanager
def dashboard_process(storage: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """``dse dashboard --port 0`` on ``storage`` in a child process; yields its base URL and
    the process, whose stderr a test may read once the block has stopped it."""
    process = subprocess.Popen([sys.executable, "-c", LAUNCH, "dashboard", "--storage", storage,
                                "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if not match:
            process.kill()
            pytest.fail(f"the dashboard did not start: {line}{process.stderr.read()}")
        yield match.group(1), process
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def dashboard(storage: str) -> Iterator[str]:
    """``dse dashboard --port 0`` on ``storage`` in a child process; yields its base URL."""
    with dashboard_process(storage) as (base, _process):
        yield base
