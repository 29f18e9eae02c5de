"""Exceptions raised for bad input. Expected evaluation failures are results, not exceptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class DseError(Exception):
    """Base class of every error dse reports to a user."""


class UsageError(DseError):
    """A name, value or option given by the user is not valid (CLI exit status 2)."""


class TargetFileError(DseError):
    """A target description file is malformed; the message names the file, key and problem."""


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON file at ``path``; a missing file or bad JSON is a :class:`UsageError`
    naming ``what`` the file was meant to be."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {str(path)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid JSON: {exc}") from None
