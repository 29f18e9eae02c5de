"""Exceptions raised for bad input. Expected evaluation failures are results, not exceptions."""

from __future__ import annotations


class DseError(Exception):
    """Base class of every error dse reports to a user."""


class UsageError(DseError):
    """A name, value or option given by the user is not valid (CLI exit status 2)."""


class TargetFileError(DseError):
    """A target description file is malformed; the message names the file, key and problem."""
