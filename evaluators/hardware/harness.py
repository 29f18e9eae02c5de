"""The measurement harness every hardware backend shares.

A backend is a function ``run(**job) -> RunOutput`` executed in a separate worker process (so a
hung run can be killed). The harness warms up, then repeats until the spread of the measured
times is small enough or a cap is reached, and records the median, the spread and every time. A
run that does not answer within the timeout is killed and recorded as ``timeout`` (the config is
not retried); a run whose product differs from the reference is ``failed``, never fast. One run
at a time per physical device: an exclusive lock file per device (and a Ray resource per device
when evaluations run on Ray).
"""

from __future__ import annotations

import fcntl
import importlib
import multiprocessing as mp
import os
import statistics
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.results import Status


@dataclass(frozen=True)
class RunOutput:
    """What one run of a backend reports."""

    seconds: float  # the measured time of the operation
    correct: bool  # the product matched the reference
    detail: str = ""  # e.g. the largest error, or a tool's message


@dataclass(frozen=True)
class MeasureSettings:
    """How a config is measured: warm-up runs, the least and most timed runs, the spread that ends
    it early, and how long one run may take."""

    warmup: int = 1
    min_repeats: int = 3
    max_repeats: int = 10
    target_spread: float = 0.05  # (max - min) / median of the repeats
    timeout_s: float = 60.0


@dataclass
class Measurement:
    """A config's measurement: its status, the seconds of each timed run and, unless ok, why."""

    status: Status
    times: list[float] = field(default_factory=list)
    reason: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        return (max(self.times) - min(self.times)) / self.median if self.times else 0.0


def _worker(conn: Any) -> None:
    """Run jobs sent by the harness until told to stop (runs in its own process)."""
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the harness went away
            return
        if message is None:
            return
        target, job = message
        try:
            module, _, name = target.partition(":")
            output = getattr(importlib.import_module(module), name)(**job)
            conn.send(("ok", output))
        except Exception:  # noqa: BLE001 - reported to the harness as a failed run
            conn.send(("error", traceback.format_exc(limit=4)))


class Worker:
    """A spawned process that runs backend jobs; replaced when a run has to be killed."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env or {}
        self._process: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        saved = {k: os.environ.get(k) for k in self._env}
        os.environ.update(self._env)  # the child inherits the environment at spawn time
        try:
            self._process = ctx.Process(target=_worker, args=(child,), daemon=True)
            self._process.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self._conn = parent

    def run(self, target: str, job: dict[str, Any], timeout_s: float) -> tuple[str, Any]:
        """("ok", RunOutput) | ("error", traceback or why the process died) | ("timeout",
        None). A process that dies during the run (a crashing kernel, the OOM killer) is an
        error of the run: the next run gets a fresh one."""
        if self._process is None or not self._process.is_alive():
            self._start()
        try:
            self._conn.send((target, job))
            if not self._conn.poll(timeout_s):
                self.kill()
                return "timeout", None
            return self._conn.recv()
        except (EOFError, OSError):  # the pipe closed: the process is gone
            code = None
            if self._process is not None:
                # the pipe closes before the process is reaped: its exit code is known only
                # once join returns
                self._process.join(5)
                code = self._process.exitcode
            self.kill()
            return "error", f"the worker process died (exit code {code})"

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        self._process = self._conn = None

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._conn.send(None)
            self._process.join(5)
        self.kill()


@contextmanager
def device_lock(device: str) -> Iterator[None]:
    """Exclusive use of one physical device across processes of this host."""
    path = Path(tempfile.gettempdir()) / f"dse-device-{device}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def measure(worker: Worker, target: str, job: dict[str, Any], settings: MeasureSettings,
            device: str) -> Measurement:
    """Warm up, then repeat ``target(**job)`` until the spread settles (see the module doc)."""
    with device_lock(device):
        times: list[float] = []
        for index in range(settings.warmup + settings.max_repeats):
            state, value = worker.run(target, job, settings.timeout_s)
            if state == "timeout":
                return Measurement(Status.TIMEOUT, times,
                                   f"a run did not finish within {settings.timeout_s:g} s "
                                   "and was killed")
            if state == "error":
                # a fresh process for the next run: an error can leave this one unusable (a
                # GPU fault poisons the process's CUDA context for every later launch)
                worker.kill()
                return Measurement(Status.FAILED, times, f"the run raised: {value}")
            if not value.correct:
                return Measurement(Status.FAILED, times,
                                   f"wrong product (not counted as a result): {value.detail}")
            if index < settings.warmup:
                continue
            times.append(value.seconds)
            if len(times) >= settings.min_repeats:  # settled: the last few runs agree
                window = times[-settings.min_repeats:]
                if (max(window) - min(window)) / statistics.median(window) \
                        <= settings.target_spread:
                    break
        return Measurement(Status.OK, times)
