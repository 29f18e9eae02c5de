"""What a command group (entry-point group ``dse.commands``) builds its commands with.

A group is a function ``add_commands(subparsers)`` that adds its parsers, each with
``set_defaults(func=...)``; ``func(args)`` returns the exit status. A command that stores or
reads results calls :func:`add_storage_option`: the ``dse`` command line then opens the store
once, before the command runs, and passes it as ``args.store`` (a command whose store is
``deferred`` calls ``args.open_store("create")`` or ``args.open_store("existing")`` itself, once
its own input is checked); a command that only reads opens it ``read`` only. Keep the module
light (no NumPy at import): ``dse --help`` imports every group.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

DEFAULT_STORAGE = "dse.db"
STORE_MODES = ("read", "existing", "create", "deferred")


def whole_number(text: str) -> int:
    """An integer written in ASCII digits (``int`` alone also reads other scripts' digits), of
    at most 30 of them."""
    try:
        if not text.strip().isascii() or len(text.strip()) > 30:
            raise ValueError
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None


def positive_int(text: str) -> int:
    """A count that must be at least 1 (configs to list, samples, a tile size), and at most
    :data:`dse.core.limits.COUNT_MAX`."""
    from dse.core.limits import COUNT_MAX

    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > COUNT_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {COUNT_MAX:,}")
    return value


def study_name(text: str) -> str:
    """An argparse type: the name of a study (see :func:`dse.core.limits.name_problem`)."""
    from dse.core.limits import name_problem

    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def limited_int(key: str) -> Callable[[str], int]:
    """An argparse type: an integer within the range :data:`dse.core.limits.NUMBERS` gives
    ``key``."""
    from dse.core.limits import out_of_range

    def parse(text: str) -> int:
        value = whole_number(text)
        problem = out_of_range(key, value)
        if problem:
            raise argparse.ArgumentTypeError(f"{problem}, got {value:,}")
        return value

    return parse


def name_values(items: Sequence[str] | None, option: str) -> dict[str, str]:
    """Repeated ``option NAME=VALUE`` items as a dict; a name given twice is refused (the
    first value would be dropped without a word)."""
    from dse.core.errors import UsageError

    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{option} expects NAME=VALUE, got {item!r}")
        if name.strip() in out:
            raise UsageError(f"{option} {name.strip()} is given twice")
        out[name.strip()] = value.strip()
    return out


def add_storage_option(parser: argparse.ArgumentParser, mode: str = "read",
                       help_default: str | None = None) -> None:
    """Add ``--storage`` to a command; the store is opened before the command runs.

    ``mode``: ``read`` (a command that only reads: a database that does not exist, or holds no
    dse tables, is refused rather than created, and nothing is written to it), ``existing``
    (one that adds to a database that must exist), ``create`` (one that writes results) or
    ``deferred`` (the command checks its own input first, then opens the store with
    ``args.open_store(mode)``)."""
    if mode not in STORE_MODES:
        raise ValueError(f"storage mode {mode!r} is not one of {', '.join(STORE_MODES)}")
    default = help_default or f"./{DEFAULT_STORAGE}"
    parser.add_argument("--storage", default=None,
                        help=f"database URL or SQLite path (default: {default})")
    parser.set_defaults(store_mode=mode)


class ResultSink(Protocol):
    """What a command receives as ``args.store`` to store results outside any study (the
    results store; its other methods are dse's own)."""

    safe_url: str

    def put_results(self, target: Any, workload_body: Mapping[str, Any], space: str,
                    configs: Sequence[Mapping[str, Any]],
                    runs: Sequence[tuple[Any, Sequence[Any]]]) -> None:
        """Store each ``(evaluator, results)`` pair's results (one per config of ``configs``,
        by position) on one workload of a target."""
