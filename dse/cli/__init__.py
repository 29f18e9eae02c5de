"""The ``dse`` command line: dse's own command groups, then every registered one (the target
families' ``dse ascend ...``, ``dse triton ...``, ``dse compare``, a user package's).

Exit status: 0 success, 1 a configuration is infeasible (or failed) or an evaluator has a bug,
2 bad usage or input, 130 interrupted. Imports are deferred to the command that needs them, so
``dse --help`` and a refusal of bad options answer at once.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import NoReturn

# dse's own command groups, in the order ``dse --help`` lists them
GROUPS = ("dse.cli.problem", "dse.cli.studies", "dse.cli.analysis", "dse.cli.deploy",
          "dse.cli.offline", "dse.cli.dashboard")


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too), its error messages cut short: they quote what
    was given, which may be 100,000 characters long."""

    def error(self, message: str) -> NoReturn:
        super().error(message if len(message) <= 500 else message[:497] + "...")


def _error(exc: Exception) -> None:
    """Print a user's error, cut to one paragraph: a message may quote a value the user gave,
    which can be thousands of characters long."""
    from dse.core.limits import cut

    print(f"dse: error: {cut(str(exc), MESSAGE_CHARS)}", file=sys.stderr)


MESSAGE_CHARS = 1000


def build_parser() -> argparse.ArgumentParser:
    """The ``dse`` argument parser: every command, the registered groups' included."""
    from dse.core.errors import DseError
    from dse.core.registry import load, registered

    parser = _Parser(prog="dse", description="GEMM design-space exploration")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        import_module(group).add_commands(sub)
    for name in registered("command group"):  # target families' own (dse ascend ...)
        try:
            load("command group", name)(sub)
        except DseError:
            raise
        except Exception as exc:  # a plug-in's commands clash or break: say whose
            raise DseError(f"the command group {name!r} cannot add its commands: "
                           f"{type(exc).__name__}: {exc}") from exc
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dse`` command in ``argv`` (default: the process's arguments) and return its exit
    status; an unknown evaluator, a ``DseError`` or a path that cannot be used is printed and
    gives 2, an evaluator's bug (its traceback printed) 1, Ctrl-C 130."""
    from dse.core.errors import DseError

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage and the bad option (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    except DseError as exc:  # a registered command group that cannot be loaded
        _error(exc)
        return 2
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return _run(func, args)
    except KeyboardInterrupt:  # Ctrl-C outside a study's run (which commits and says so)
        print("dse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`dse trials ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Check the evaluator named, open the store, run the command; errors as messages."""
    from dse.cli.common import open_store_of
    from dse.core.errors import DseError, InfrastructureError
    from dse.core.evaluator import EvaluatorError

    try:
        name = getattr(args, "evaluator", None)
        if isinstance(name, str):
            from dse.core.registry import evaluator_names

            if name not in evaluator_names():
                raise DseError(f"unknown evaluator {name!r}; valid: "
                               f"{', '.join(evaluator_names())}")
        if getattr(args, "out", None):
            from dse.storage.engine import refuse_database_as_out

            refuse_database_as_out(args.out, getattr(args, "storage", None))
        args.store = open_store_of(args)
        args.open_store = functools.partial(open_store_of, args)  # for a deferred store
        return func(args)
    except InfrastructureError as exc:  # not the input's fault: the cluster's
        _error(exc)
        return 1
    except DseError as exc:
        _error(exc)
        return 2
    except EvaluatorError as exc:
        print(f"dse: {exc}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as exc:  # a file read elsewhere than through read_text
        print(f"dse: error: a file given is not UTF-8 text ({exc.reason} at byte {exc.start})",
              file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # a path the user gave (--out, --configs, a results file) that cannot be used as one
        where = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
        print(f"dse: error: {where}", file=sys.stderr)
        return 2
