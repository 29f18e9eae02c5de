#!/usr/bin/env python3
"""Measure exported dse configurations on this machine; needs only Python (and what the jobs
import: NumPy for CPU jobs, PyTorch and Triton for GPU jobs).

    python3 runner.py configs.json results.json [--time-limit SECONDS]

Copy this one file next to ``configs.json`` (written by ``dse export-configs``), run it, and
bring ``results.json`` back for ``dse ingest``. Jobs of kind ``command`` run the given commands
and return their output for dse to interpret; jobs of kind ``python`` carry the source of a
measuring module (the blocked CPU GEMM, the Triton GEMM) and call its entry point in a child
process, neighbouring ones of a
workload that differ only in their ``batch`` argument in one call. The results file is rewritten
after every call, so a run cut short keeps what finished (ingest it, and export what is left).
With ``--time-limit``, no call starts after that many seconds, and a python job stops measuring
(it sees the deadline in ``DSE_RUNNER_DEADLINE``, seconds since the epoch): the configs not
measured are left out of the results, to be exported again after ingest. A python job's module
may check the machine first (``preflight``): without what the jobs need, the runner stops with
exit status 2 and measures nothing, rather than record every config as failed. A call that
fails as a whole (its process died) is measured again in halves, down to the config at fault.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

RESULTS_FORMAT = "dse-results/1"
DEADLINE_VARIABLE = "DSE_RUNNER_DEADLINE"
SKIPPED = "skipped"  # a config left unmeasured: no time left, or its call failed as a whole


def run_command(job: dict[str, Any]) -> dict[str, Any]:
    """Run a ``command`` job's commands in turn, stopping at the first that fails; their joined
    output and last return code, raw, for dse to interpret."""
    output, code = [], 0
    for argv in job["commands"]:
        try:
            done = subprocess.run(argv, cwd=job.get("cwd"), capture_output=True, text=True,
                                  timeout=job.get("timeout_s", 600))
        except subprocess.TimeoutExpired:
            return {"status": "raw", "output": "".join(output), "returncode": None}
        except FileNotFoundError as exc:
            return {"status": "raw", "output": str(exc), "returncode": 127}
        output.append(done.stdout + done.stderr)
        code = done.returncode
        if code != 0:
            break
    return {"status": "raw", "output": "".join(output), "returncode": code}


_MODULES: dict[str, Any] = {}


def _module(source: str) -> Any:
    """The module of a job's source, loaded once, from a file (compilers such as Triton's read
    a kernel's source back)."""
    import hashlib
    import importlib.util
    import tempfile

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    module = _MODULES.get(digest)
    if module is None:
        # named by its content, in a folder of this user's alone: every call (a child
        # process each) reuses the one file, and nobody else can put code there
        folder = os.path.join(tempfile.gettempdir(), f"dse-jobs-{getattr(os, 'getuid', int)()}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.stat(folder)
        if info.st_uid != getattr(os, "getuid", int)() or info.st_mode & 0o077:
            folder = tempfile.mkdtemp(prefix="dse-jobs-")
        path = os.path.join(folder, f"dse_job_{digest}.py")
        try:
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        except OSError:
            current = None
        if current != source:
            with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as handle:
                handle.write(source)
            os.replace(f"{path}.{os.getpid()}", path)
        spec = importlib.util.spec_from_file_location(f"dse_job_{digest}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _MODULES[digest] = module
    return module


def _call_entry(source: str, entry: str, args: dict[str, Any]) -> Any:
    """``entry(**args)`` of the module of ``source`` (in :func:`run_python`'s child process)."""
    return getattr(_module(source), entry)(**args)


class CallFailed(Exception):
    """A python job's call failed as a whole (its process died, or its entry raised): no
    outcome is known for any of its configs."""

    def __init__(self, reason: str, died: bool) -> None:
        super().__init__(reason)
        self.died = died  # the process died (a config can do that), not the entry raising


class MachineLost(Exception):
    """The machine no longer runs the jobs (its preflight fails now): stop measuring."""


def _in_child(source: str, entry: str, args: dict[str, Any]) -> Any:
    """``entry(**args)`` of the module of ``source`` in a fresh child process (a crash, or a
    GPU error that poisons the process's CUDA context, ends that process only).

    Raises:
        CallFailed: the process died or the entry raised.
    """
    import concurrent.futures
    import multiprocessing

    try:
        with concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(_call_entry, source, entry, args).result()
    except concurrent.futures.process.BrokenProcessPool:
        raise CallFailed("the process running the job died", died=True) from None
    except Exception as exc:  # noqa: BLE001 - the caller reports it
        raise CallFailed(f"{type(exc).__name__}: {exc}"[:2000], died=False) from None


def run_python(job: dict[str, Any]) -> list[dict[str, Any]]:
    """``entry(**args)`` of the module whose source the job carries, in a fresh child process:
    one outcome per element of the job's ``batch`` argument (a list), or one outcome when it
    has none.

    Raises:
        CallFailed: the call failed as a whole.
    """
    outcome = _in_child(job["source"], job["entry"], job["args"])
    return outcome if isinstance(outcome, list) else [outcome]


def preflight(job: dict[str, Any]) -> str | None:
    """Why this machine cannot run ``job`` (None when it can, or cannot tell): a python job's
    module may define ``preflight(job)``, called here once, in a child process, with the
    first element of the job's batch, before any config is measured, so a missing GPU or
    compiler stops the run instead of failing every config."""
    if job["kind"] != "python" or not hasattr(_module(job["source"]), "preflight"):
        return None
    first = job["args"][job["batch"]][0] if "batch" in job else job["args"]
    try:
        _in_child(job["source"], "preflight", {"job": first})
    except CallFailed as exc:
        return str(exc)
    return None


def _same_call(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two python jobs differ only in their batch argument (so one call serves both)."""
    if a["kind"] != "python" or b["kind"] != "python" or "batch" not in a \
            or a.get("batch") != b.get("batch"):
        return False
    rest = {k: v for k, v in a["args"].items() if k != a["batch"]}
    return (a["source"] == b["source"] and a["entry"] == b["entry"]
            and rest == {k: v for k, v in b["args"].items() if k != b["batch"]})


def calls(configs: list[dict[str, Any]]) -> list[list[int]]:
    """The configs grouped into calls: neighbouring python jobs of one workload that differ only
    in their batch argument run as one call (the Triton GEMM then compiles all of them in
    parallel); the results file is written after each call."""
    groups: list[list[int]] = []
    for index, item in enumerate(configs):
        first = configs[groups[-1][0]] if groups else None
        if first is not None and first["workload"] == item["workload"] \
                and _same_call(first["job"], item["job"]):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def _merged(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    first = jobs[0]
    if len(jobs) == 1:
        return first
    name = first["batch"]
    return {**first, "args": {**first["args"], name: [x for j in jobs for x in j["args"][name]]}}


def perform(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Outcomes of a job: one per element of a python job's batch, else one.

    Raises:
        CallFailed: a python job's call failed as a whole.
    """
    if job["kind"] == "python":
        return run_python(job)
    return [RUNNERS[job["kind"]](job)]


def _out_of_time() -> bool:
    deadline = os.environ.get(DEADLINE_VARIABLE)
    return deadline is not None and time.time() >= float(deadline)


def measure(configs: list[dict[str, Any]], group: list[int]) -> list[dict[str, Any]]:
    """Outcomes of one call's configs. When its process dies, the call is split in halves,
    each measured again in a fresh process, down to the config that dies alone: recorded
    failed, unless the machine's preflight now fails too (then :class:`MachineLost`). An
    entry that raises is no config's fault: its configs are left unmeasured (skipped), as
    is what the time limit leaves."""
    try:
        return perform(_merged([configs[i]["job"] for i in group]))
    except CallFailed as exc:
        print(f"  the call of {len(group)} configs failed: {str(exc)[:300]}", file=sys.stderr,
              flush=True)
        if not exc.died or _out_of_time():
            return [{"status": SKIPPED, "call_failed": str(exc)}] * len(group)
        if len(group) == 1:
            problem = preflight(configs[group[0]]["job"])
            if problem is not None:
                raise MachineLost(problem) from None
            return [{"status": "failed", "reason": str(exc)}]
        half = len(group) // 2
        print("  measuring them again in halves", file=sys.stderr, flush=True)
        first = measure(configs, group[:half])
        if _out_of_time():
            return first + [{"status": SKIPPED}] * (len(group) - half)
        return first + measure(configs, group[half:])


RUNNERS = {"command": run_command}


def _write(path: str, exported: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """Write the results file (after every call: a run cut short keeps what finished)."""
    provenance = {"host": platform.node(), "python": platform.python_version(),
                  "machine": platform.machine(), "processor": platform.processor()}
    with open(path + ".part", "w") as handle:
        json.dump({"format": RESULTS_FORMAT, "study": exported["study"],
                   "evaluator": exported["evaluator"], "provenance": provenance,
                   "results": results}, handle, indent=1)
    os.replace(path + ".part", path)


def _arguments(argv: list[str]) -> tuple[str, str, float | None] | None:
    """(configs file, results file, time limit in seconds or None), or None when malformed."""
    limit = None
    if len(argv) == 4 and argv[2] == "--time-limit":
        try:
            limit = float(argv[3])
        except ValueError:
            return None
        argv = argv[:2]
    return (argv[0], argv[1], limit) if len(argv) == 2 and (limit is None or limit > 0) else None


def _load(configs_path: str, results_path: str) -> dict[str, Any]:
    """The configs file, checked enough to run; raises ValueError saying what is wrong (before
    anything is measured: a results file that cannot be written is found now, not after the
    first hour)."""
    folder = os.path.dirname(os.path.abspath(results_path))
    if not os.path.isdir(folder):
        raise ValueError(f"{results_path}: no such directory {folder}")
    try:
        with open(configs_path, encoding="utf-8") as handle:
            exported = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{configs_path}: cannot read the configs file: {exc}") from None
    jobs = exported.get("configs") if isinstance(exported, dict) else None
    if isinstance(jobs, list) and any(isinstance(c, dict) and isinstance(c.get("job"), dict)
                                      and c["job"].get("kind") == "cpu" for c in jobs):
        raise ValueError(f"{configs_path}: its CPU jobs (kind 'cpu') were written by an older "
                         "dse; export the configs again with this one")
    if not isinstance(jobs, list) \
            or not all(isinstance(c, dict) and isinstance(c.get("job"), dict)
                       and c["job"].get("kind") in (*RUNNERS, "python") for c in jobs):
        raise ValueError(f"{configs_path}: not a configs file written by dse (a list "
                         "'configs' of jobs of kind command or python)")
    return exported


def main(argv: list[str]) -> int:
    """``runner.py CONFIGS RESULTS [--time-limit S]``: measure every exported config (those
    there is time for), rewriting the results file after each call; 2 on a wrong command line
    or configs file (with the usage or the reason), or when this machine cannot run the jobs
    (with what is missing: nothing more is measured then); 1 when a call failed as a whole
    (its configs are left out, to be exported again)."""
    parsed = _arguments(argv)
    if parsed is None:
        print(__doc__, file=sys.stderr)
        return 2
    configs_path, results_path, limit = parsed
    try:
        exported = _load(configs_path, results_path)
    except ValueError as exc:
        print(f"runner: {exc}", file=sys.stderr)
        return 2
    if limit is not None:
        os.environ[DEADLINE_VARIABLE] = str(time.time() + limit)  # python jobs' children see it
    configs, results, written, broken = exported["configs"], [], False, 0
    checked: set[str] = set()
    for group in calls(configs):
        if _out_of_time():
            break
        job = configs[group[0]]["job"]
        if job["kind"] == "python" and job["source"] not in checked:
            checked.add(job["source"])
            problem = preflight(job)
            if problem is not None:
                _write(results_path, exported, results)
                print(f"runner: this machine cannot run these jobs: {problem}\n"
                      f"(nothing more was measured; {len(results)} results in {results_path})",
                      file=sys.stderr)
                return 2
        print(f"[{group[0] + 1}-{group[-1] + 1}/{len(configs)}] {job['kind']} ...",
              file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            outcomes = measure(configs, group)
        except MachineLost as exc:
            _write(results_path, exported, results)
            print(f"runner: this machine stopped running these jobs: {exc}\n"
                  f"({len(results)} results in {results_path})", file=sys.stderr)
            return 2
        each = (time.perf_counter() - start) / len(group)
        for index, outcome in zip(group, outcomes, strict=True):
            if outcome.get("status") == SKIPPED:
                broken += "call_failed" in outcome  # not the time limit
                continue
            item = configs[index]
            results.append({"id": item["id"], "workload": item["workload"],
                            "params": item["params"], "elapsed_s": each, **outcome})
        _write(results_path, exported, results)
        written = True
    if not written:  # no call ran (no configs, or the time limit): still a results file
        _write(results_path, exported, results)
    if len(results) < len(configs):
        print(f"{len(configs) - len(results)} of {len(configs)} configs not measured (the time "
              f"limit, or a call that failed as a whole, above); ingest {results_path}, then "
              "export what is left", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
