"""Backends that misbehave on purpose, for the harness tests (run in the harness worker)."""

from __future__ import annotations

import time

from evaluators.hardware.harness import RunOutput


def hang(**_: object) -> RunOutput:
    time.sleep(3600)
    raise AssertionError("unreachable")


def wrong(**_: object) -> RunOutput:
    return RunOutput(0.001, False, "max |error| 1 (tolerance 0.001)")


def crash(**_: object) -> RunOutput:
    raise RuntimeError("device lost")


def die(**_: object) -> RunOutput:
    """The process ends in the middle of a run, as a segfaulting kernel or the OOM killer
    ends it."""
    import os

    os._exit(11)


def steady(seconds: float = 0.01) -> RunOutput:
    return RunOutput(seconds, True)


def pid(**_: object) -> RunOutput:
    """The worker's process id, as the run's 'seconds' (to tell workers apart)."""
    import os

    return RunOutput(float(os.getpid()), True)


def logged_amx_run(log: str, **job: object) -> RunOutput:
    """The AMX runner, appending the run's start and end (monotonic seconds) to ``log``: what
    a test of the device lock compares across processes."""
    from evaluators.hardware.amx_kernel import run

    start = time.monotonic()
    out = run(**job)  # type: ignore[arg-type]
    with open(log, "a") as handle:
        handle.write(f"{start} {time.monotonic()}\n")
    return out
