"""Processes that must not outlive this one: the local Ray a study starts for itself.

Ray's agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) survive a driver killed with
SIGKILL, which no handler can catch, and then linger for ever. A reaper is a small process of
its own session that holds a pipe from this one: the kernel closes the pipe however this process
ends, and the reaper then ends the processes it was given (those still the same processes: a
PID reused since is left alone). Linux only (it reads ``/proc``); elsewhere nothing is done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (the state first, then the
    parent's pid, ...), or None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...), from ``/proc``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := proc_stat(int(entry.name))) is not None:
            parents.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _start_time(pid: int) -> str | None:
    stat = proc_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else None


def reap(named: list[tuple[int, str]]) -> None:
    """End each of ``named`` (pid, start time) that is still that process: SIGTERM, then
    SIGKILL a second later to what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid, start in named if pid != os.getpid() and _start_time(pid) == start]
        for pid in alive:
            try:
                os.kill(pid, sig)
            except OSError:
                pass  # ended meanwhile
        if not alive:
            return
        time.sleep(1.0)


class Reaper:
    """Ends the given processes once this process ends, however it ends (see the module)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        if sys.platform.startswith("linux"):
            self._process = subprocess.Popen(
                [sys.executable, "-m", "dse.study.execution.reaper"], stdin=subprocess.PIPE,
                text=True, start_new_session=True, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)

    def watch(self, pids: list[int]) -> None:
        """End ``pids`` too when this process ends."""
        if self._process is None or self._process.stdin is None:
            return
        lines = [f"{pid} {start}\n" for pid in pids
                 if pid != self._process.pid and (start := _start_time(pid))]
        self._process.stdin.write("".join(lines))
        self._process.stdin.flush()

    def release(self) -> None:
        """This process ends what it started itself: the reaper ends only what is left."""
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
            self._process.wait(timeout=10)
            self._process = None


if __name__ == "__main__":  # the reaper: read "pid start" lines until the pipe closes
    reap([(int(pid), start) for pid, start in (line.split() for line in sys.stdin)])
