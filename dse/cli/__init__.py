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
import re
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any, NoReturn

from dse.core.suggest import close_names, did_you_mean

# dse's own command groups, in the order ``dse --help`` lists them
GROUPS = ("dse.cli.problem", "dse.cli.studies", "dse.cli.analysis", "dse.cli.deploy",
          "dse.cli.offline", "dse.cli.dashboard")


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too): no abbreviated options (``--trial 10`` is not
    taken for ``--trials``: a typo refused, not guessed), a mistyped command or option answered
    with the names it looks like, error messages cut short (they quote what was given, which
    may be 100,000 characters long)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(parsed, _REFUSER):
            # the innermost (sub)command parsed first: it knows the options that were meant
            setattr(parsed, _REFUSER, self)
        return parsed, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        refuser = vars(parsed).pop(_REFUSER, self)
        if extras and refuser.get_default("keeps_extras"):  # a command reads them itself
            parsed.extras, extras = extras, []
        if extras:
            # compared without their dashes, which every option shares
            options = [o[2:] for action in refuser._actions for o in action.option_strings
                       if o.startswith("--")]
            hints = "".join(f" (did you mean {' or '.join('--' + c for c in close)}?)"
                            for e in extras if e.startswith("--")
                            and (close := close_names(e[2:].split("=")[0], options)))
            refuser.error(f"unrecognized arguments: {' '.join(extras)}{hints}")
        return parsed

    def error(self, message: str) -> NoReturn:
        chosen = _INVALID_CHOICE.search(message)
        if chosen:  # a mistyped command or choice: name the ones it looks like
            choices = [c.strip(" '") for c in chosen.group(2).split(",")]
            message += did_you_mean(chosen.group(1), choices)
        super().error(message if len(message) <= 500 else message[:497] + "...")


_REFUSER = "_dse_refusing_parser"
# argparse's words, quoted choices up to Python 3.11, bare ones after
_INVALID_CHOICE = re.compile(r"invalid choice: '?([^']*?)'? \(choose from (.*)\)$")


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
                valid = evaluator_names()
                raise DseError(f"unknown evaluator {name!r}{did_you_mean(name, valid)}; "
                               f"valid: {', '.join(valid)}")
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
