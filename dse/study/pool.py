"""Where evaluations run: in this process (vectorised evaluators) or as Ray tasks.

A pool evaluates batches of feasible configs (the runner checked them): an exception the
evaluator declares fails its configs; a bug (:class:`EvaluatorError`) or a usage error raised
while evaluating stops the study, wherever the evaluation ran. A lost worker or node is neither:
it is a fault of the machinery, recorded (:class:`Fault`) and tried again up to
:data:`ATTEMPTS` times, then the study stops (:class:`InfrastructureError`) with nothing of those
configs stored, so a later run evaluates them instead of being served the loss.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dse.core.errors import DseError, InfrastructureError, UsageError
from dse.core.evaluator import EvalContext, Evaluator, EvaluatorError, run_feasible
from dse.core.params import ConfigBatch, batch_len, batch_take
from dse.core.results import EvalResult
from dse.study.reaper import Reaper, descendants

ATTEMPTS = 3  # of a batch of configs whose worker or node was lost (Ray itself retries none)
MESSAGE_CHARS = 2000  # of a fault's message kept (Ray's can hold a whole log)


@dataclass(frozen=True)
class Fault:
    """One loss of the machinery: what Ray raised, the attempt of the batch it cost, how many
    configs that batch held and whether they are tried again."""

    kind: str
    message: str
    attempt: int
    configs: int
    retried: bool

    def row(self) -> dict[str, Any]:
        """The fault as the store records it (study, workload, host and time added there)."""
        return {"kind": self.kind, "message": self.message, "attempt": self.attempt,
                "configs": self.configs, "retried": int(self.retried)}


class Pool(Protocol):
    """Runs an evaluator on batches of feasible configs."""

    workers: int

    def evaluate(self, evaluator: Evaluator, batch: ConfigBatch,
                 ctx: EvalContext) -> list[EvalResult]:
        """One result per config of ``batch``, in order."""

    def take_faults(self) -> list[Fault]:
        """The faults since the last call (the pool forgets them)."""

    def close(self) -> None:
        """Release the pool's workers."""


class InProcessPool:
    """Runs the evaluator here; right for vectorised models that score a batch in microseconds."""

    workers = 1

    def evaluate(self, evaluator: Evaluator, batch: ConfigBatch,
                 ctx: EvalContext) -> list[EvalResult]:
        return run_feasible(evaluator, batch, ctx)

    def take_faults(self) -> list[Fault]:
        return []  # an exception here is the evaluator's own: a result or a bug

    def close(self) -> None:
        pass


def _remote_evaluate(evaluator: Evaluator, batch: ConfigBatch,
                     ctx: EvalContext) -> list[EvalResult] | DseError | EvaluatorError:
    """A Ray task's body: the results, or the exception that must stop the study (returned,
    so it reaches the driver as itself, not wrapped in Ray's task error)."""
    try:
        return run_feasible(evaluator, batch, ctx)
    except (DseError, EvaluatorError) as exc:
        return exc


def _signal_handlers() -> dict[int, Any]:
    """The handlers of SIGINT and SIGTERM (only the main thread may set them again)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore(handlers: dict[int, Any]) -> None:
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


# an HTTP/2 client's connection preface and its (empty) SETTINGS frame: a gRPC server, as a
# Ray head's GCS and its client server are, answers with a SETTINGS frame of its own
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_FRAME = 4
START_HINT = ("start a cluster with `ray start --head` and give the address it prints, or "
              "`auto` for one on this machine")


def _require_listening(address: str) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) where nothing accepts a connection, or
    where what does answers no HTTP/2 (gRPC) within 5 s: ray.init would retry for many minutes,
    holding the study's lease."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as conn:
            if _ray_uses_tls():  # a TLS head answers no plain HTTP/2: only connecting is checked
                return
            conn.sendall(HTTP2_PREFACE)
            reply = _read_frame_header(conn)
    except OSError as exc:
        raise UsageError(f"--ray-address {address}: nothing answers there ({exc}); "
                         f"{START_HINT}") from None
    if len(reply) < 9 or reply[3] != SETTINGS_FRAME:
        said = f"its reply began {reply!r}" if reply else "it sent nothing back within 5 s"
        raise UsageError(f"--ray-address {address}: what answers there is not a Ray cluster "
                         f"(it does not speak gRPC: {said}); {START_HINT}")


def _ray_uses_tls() -> bool:
    """Whether Ray connects with TLS here (``RAY_USE_TLS``, as Ray itself reads it)."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def _read_frame_header(conn: Any) -> bytes:
    """The first 9 bytes the server sends (an HTTP/2 frame header), or fewer if it stops or
    stays silent for the connection's timeout."""
    reply = b""
    try:
        while len(reply) < 9:
            chunk = conn.recv(9 - len(reply))
            if not chunk:
                break
            reply += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return reply


class RayPool:
    """Ray tasks on a local embedded Ray (``workers`` CPUs) or a cluster; a batch is split into
    two chunks per worker (fewer tasks than configs, still balanced)."""

    def __init__(self, workers: int, address: str | None = None, evaluator: Any = None) -> None:
        import ray

        self._ray = ray
        self._started = not ray.is_initialized()
        self._reaper: Reaper | None = None
        # one run at a time per physical device: a Ray resource of 1 per device
        self._device = evaluator.device if evaluator is not None else None
        resources = {f"dse_device_{self._device}": 1} if self._device else None
        if self._started:
            if address:
                _require_listening(address)
            handlers = _signal_handlers()
            try:
                ray.init(address=address, num_cpus=None if address else workers,
                         resources=None if address else resources,
                         include_dashboard=False, log_to_driver=False, configure_logging=False)
            except ConnectionError as exc:  # no cluster at the address, or not let in
                hint = ("" if os.environ.get("RAY_AUTH_MODE") else
                        "; if the head uses Ray's token authentication, set RAY_AUTH_MODE=token "
                        "and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) here as on its nodes")
                raise UsageError(f"--ray-address {address}: {exc}{hint}") from None
            except SystemExit:  # SIGTERM while Ray started: its handler exits; stop as Ctrl-C
                ray.shutdown()
                raise KeyboardInterrupt from None
            finally:  # Ray installs its own SIGTERM handler (an exit): the run's stays
                _restore(handlers)
            if not address:  # the local Ray started here ends with this process
                self._reaper = Reaper()
                self._reaper.watch(descendants(os.getpid()))
        self.workers = workers if address is None else int(ray.cluster_resources().get("CPU", 1))
        device = f"dse_device_{self._device}"
        if address and self._device and not ray.cluster_resources().get(device):
            # not an error: an autoscaler may add such a node; but the run would wait in silence
            print(f"dse: warning: no node of the cluster offers {device}; the evaluations "
                  f"wait until one joins (ray start --resources '{{\"{device}\": 1}}')",
                  file=sys.stderr)
        # Ray does not retry a lost task itself: each loss is a fault this pool records
        self._task = ray.remote(num_cpus=1, resources=resources, max_retries=0)(_remote_evaluate)
        self._evaluator_ref: Any = None
        self._evaluator: Any = None
        self._faults: list[Fault] = []

    def evaluate(self, evaluator: Evaluator, batch: ConfigBatch,
                 ctx: EvalContext) -> list[EvalResult]:
        if evaluator is not self._evaluator:  # ship the evaluator to the object store once
            self._evaluator, self._evaluator_ref = evaluator, self._ray.put(evaluator)
            if self._reaper is not None:  # Ray's agents may have started since ray.init
                self._reaper.watch(descendants(os.getpid()))
        ctx_ref = self._ray.put(ctx)
        n = batch_len(batch)
        chunks = [c for c in np.array_split(np.arange(n), min(n, 2 * self.workers)) if len(c)]
        refs = [self._submit(batch_take(batch, c), ctx_ref) for c in chunks]
        out: list[EvalResult] = []
        for chunk, ref in zip(chunks, refs, strict=True):
            results = self._get(ref, batch_take(batch, chunk), ctx_ref)
            if isinstance(results, BaseException):
                raise results
            out.extend(results)
        return out

    def _submit(self, batch: ConfigBatch, ctx_ref: Any) -> Any:
        return self._task.remote(self._evaluator_ref, batch, ctx_ref)

    def _get(self, ref: Any, batch: ConfigBatch, ctx_ref: Any) -> Any:
        """A chunk's results (or the exception that stops the study); a lost worker or node is
        recorded and the chunk submitted again, up to :data:`ATTEMPTS` times in all."""
        attempt = 1
        while True:
            try:
                return self._ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - whatever Ray raises, no config caused it
                last = attempt == ATTEMPTS
                self._faults.append(Fault(type(exc).__name__, str(exc)[:MESSAGE_CHARS],
                                          attempt, batch_len(batch), not last))
                if last:
                    first_line = (str(exc).splitlines() or ["no message"])[0][:200]
                    raise InfrastructureError(
                        f"the Ray cluster lost the evaluation of {batch_len(batch)} configs "
                        f"{ATTEMPTS} times ({type(exc).__name__}: {first_line}); nothing of "
                        "them is stored: run the study again once the cluster is healthy "
                        "(`dse faults STUDY` lists what was lost)") from None
            attempt += 1
            ref = self._submit(batch, ctx_ref)

    def take_faults(self) -> list[Fault]:
        faults, self._faults = self._faults, []
        return faults

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
        if self._reaper is not None:
            self._reaper.release()


def make_pool(evaluator: Evaluator, workers: int, address: str | None) -> Pool:
    """Vectorised evaluators run in-process; others on Ray when more than one worker is asked
    for or a cluster address is given."""
    if evaluator.capabilities.score or (workers <= 1 and not address):
        return InProcessPool()
    return RayPool(workers, address, evaluator)
