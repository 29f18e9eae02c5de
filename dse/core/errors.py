"""Exceptions raised for bad input. Expected evaluation failures are results, not exceptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class DseError(Exception):
    """Base class of every error dse reports to a user."""


class UsageError(DseError):
    """A name, value or option given by the user is not valid (CLI exit status 2)."""


class InfrastructureError(DseError):
    """The machinery an evaluation ran on kept failing (Ray workers or nodes lost, attempt after
    attempt): not a property of the configs, so nothing of them is stored (CLI exit status 1)."""


class TargetFileError(DseError):
    """A target description file is malformed; the message names the file, key and problem."""


def read_text(path: str | Path, what: str) -> str:
    """The text of the file at ``path``; one that is missing, unreadable or not UTF-8 (a binary
    file, another encoding) is a :class:`UsageError` naming ``what`` the file was meant to
    be."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start} is "
                         f"{exc.object[exc.start:exc.start + 1]!r})") from None
    except FileNotFoundError:
        raise UsageError(f"{what} {str(path)!r} does not exist") from None
    except OSError as exc:  # a directory, no permission, a device that refuses reads
        raise UsageError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON file at ``path``; a missing file or bad JSON is a :class:`UsageError`
    naming ``what`` the file was meant to be."""
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid JSON: {exc}") from None
