"""Where evaluations run: in this process (vectorised evaluators) or on Ray (actors or tasks).

A pool evaluates batches of feasible configs (the runner checked them): an exception the
evaluator declares fails its configs; a bug (:class:`EvaluatorError`) or a usage error raised
while evaluating stops the study, wherever the evaluation ran. A lost worker or node is neither:
it is a fault of the machinery, recorded (:class:`Fault`) and tried again up to
:data:`ATTEMPTS` times, then the study stops (:class:`InfrastructureError`) with nothing of those
configs stored, so a later run evaluates them instead of being served the loss.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dse.core.errors import DseError, InfrastructureError, UsageError
from dse.core.evaluator import EvalContext, Evaluator, EvaluatorError, run_feasible
from dse.core.params import ConfigBatch, batch_len, batch_take
from dse.core.results import EvalResult
from dse.study.execution.ray_start import start_ray
from dse.study.execution.reaper import Reaper, descendants

ATTEMPTS = 3  # of a batch of configs whose worker or node was lost (Ray itself retries none)
MESSAGE_CHARS = 2000  # of a fault's message kept (Ray's can hold a whole log)
PIECES = 2  # chunks a batch is split into per worker: balanced, yet few calls
# calls queued on an actor at once. One: an actor that dies just after a call can take that
# call's reply with it (measured: os._exit at the start of the next call), and with two queued
# the loss would be charged to the call that finished, not the one that killed it
DEPTH = 1
LOSS_WAIT_S = 60  # for the calls of an actor that was ended to resolve (Ray does it at once)
ACTORS, TASKS = "actors", "tasks"  # how a RayPool runs evaluations (see RayPool)
MODE_ENV = "DSE_RAY_POOL"  # forces one of them (tasks: the way before actors, for comparison)


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


class RayPool:
    """Evaluations on a local embedded Ray (``workers`` CPUs) or a cluster.

    Two ways to run them (``mode``): ``actors``, one long-lived Ray actor per worker that
    imports the evaluator and keeps it (and the workload's context) between batches, so a
    batch costs only its evaluation; or ``tasks``, one Ray task per chunk, which Ray places on
    any node with a free CPU (nodes that join later included). Either way a batch is split into
    :data:`PIECES` chunks per worker (fewer calls than configs, still balanced).

    Ray starts here (``ray.init``) only when no Ray runs in this process yet; the actors start
    with the first batch (or :meth:`wait_ready`) and end with :meth:`close`.
    """

    def __init__(self, workers: int, address: str | None = None, evaluator: Any = None,
                 mode: str | None = None) -> None:
        import ray

        self._ray = ray
        self._started = not ray.is_initialized()
        self._reaper: Reaper | None = None
        # one run at a time per physical device: a Ray resource of 1 per device
        self._device = evaluator.device if evaluator is not None else None
        resources = {f"dse_device_{self._device}": 1} if self._device else None
        self.mode = mode or ray_mode(evaluator, address)
        if self.mode == ACTORS and (address or (self._device and not shares_device(evaluator))):
            raise ValueError("actors run on a local Ray, for evaluators without a device or "
                             "that lock it themselves (see ray_mode)")
        if self._started:
            start_ray(ray, workers, address, resources)
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
        self._evaluator_ref: Any = None
        self._evaluator: Any = None
        self._evaluator_gen = 0
        self._ctx: EvalContext | None = None
        self._ctx_ref: Any = None
        self._ctx_gen = 0
        self._faults: list[Fault] = []
        self._watched = False
        # Ray does not retry a lost task or actor call itself: each loss is a fault recorded here
        self._task = ray.remote(num_cpus=1, resources=resources, max_retries=0)(_remote_evaluate)
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0,
                                       max_task_retries=0)(_Worker)
        self._slots: list[_Slot] = []
        self._warm_with = evaluator

    def wait_ready(self) -> None:
        """Start the actors (built with the evaluator the pool was made for) and wait until
        each has imported it; no-op for tasks. An actor that could not start is left for the
        first batch to meet as a fault."""
        if self.mode == ACTORS and self._warm_with is not None:
            self._use(self._warm_with)
            self._start_actors()
            self._ray.wait([s.ready for s in self._slots], num_returns=len(self._slots))

    def _start_actors(self) -> None:
        # at the first batch, not at creation: each actor holds a CPU for its life, and a
        # pool the runner makes but never uses (a ladder's rungs have pools of their own)
        # must not hold the CPUs those need
        if not self._slots:
            self._slots = [self._new_slot() for _ in range(self.workers)]

    def evaluate(self, evaluator: Evaluator, batch: ConfigBatch,
                 ctx: EvalContext) -> list[EvalResult]:
        self._use(evaluator)
        n = batch_len(batch)
        chunks = [c for c in np.array_split(np.arange(n), min(n, PIECES * self.workers))
                  if len(c)]
        if self.mode == ACTORS:
            self._start_actors()
            results = self._on_actors([batch_take(batch, c) for c in chunks], ctx)
        else:
            results = self._on_tasks([batch_take(batch, c) for c in chunks], ctx)
        self._watch()
        return [r for chunk in results for r in chunk]

    def _use(self, evaluator: Evaluator) -> None:
        # generations, not id(): an object freed since may leave its id to the next one
        if evaluator is not self._evaluator:  # ship the evaluator to the object store once
            self._evaluator, self._evaluator_ref = evaluator, self._ray.put(evaluator)
            self._evaluator_gen += 1

    def _watch(self) -> None:
        """Have the reaper watch Ray's workers and agents too, once they have started."""
        if self._reaper is not None and not self._watched:
            self._reaper.watch(descendants(os.getpid()))
            self._watched = True

    # -- tasks --------------------------------------------------------------------------------
    def _on_tasks(self, chunks: list[ConfigBatch], ctx: EvalContext) -> list[list[EvalResult]]:
        """Each chunk a Ray task, all submitted at once; a lost one submitted again."""
        ctx_ref = self._ray.put(ctx)
        refs = [self._task.remote(self._evaluator_ref, chunk, ctx_ref) for chunk in chunks]
        out = []
        for chunk, ref in zip(chunks, refs, strict=True):
            attempt = 1
            while True:
                try:
                    got = self._ray.get(ref)
                    break
                except Exception as exc:  # noqa: BLE001 - whatever Ray raises, no config did
                    self._lost(exc, attempt, chunk)
                attempt += 1
                ref = self._task.remote(self._evaluator_ref, chunk, ctx_ref)
            out.append(_raised(got))
        return out

    # -- actors -------------------------------------------------------------------------------
    def _new_slot(self) -> _Slot:
        actor = self._actor_class.remote(self._evaluator_ref)
        return _Slot(actor, actor.ready.remote(), evaluator_gen=self._evaluator_gen)

    def _on_actors(self, chunks: list[ConfigBatch],
                   ctx: EvalContext) -> list[list[EvalResult]]:
        """Each chunk on the next actor with room (:data:`DEPTH` calls queued on each); a lost
        actor is replaced and the chunk it was running tried again (see :meth:`_lose_slot`)."""
        self._use_ctx(ctx)
        out: list[list[EvalResult] | None] = [None] * len(chunks)
        attempts = [1] * len(chunks)
        todo = list(range(len(chunks)))
        running: dict[Any, tuple[int, int]] = {}  # call -> (chunk, slot)
        queued: list[list[Any]] = [[] for _ in self._slots]  # each slot's calls, oldest first
        while todo or running:
            for s in range(len(self._slots)):
                while todo and len(queued[s]) < DEPTH:
                    i = todo.pop(0)
                    call = self._send(self._slots[s], chunks[i])
                    running[call] = (i, s)
                    queued[s].append(call)
            (done,), _ = self._ray.wait(list(running), num_returns=1)
            i, s = running[done]
            try:
                got = self._ray.get(done)
            except Exception:  # noqa: BLE001 - whatever Ray raises, no config caused it
                for j in self._lose_slot(s, queued[s], running, out, chunks, attempts):
                    todo.insert(0, j)
                queued[s] = []
                continue
            del running[done]
            queued[s].remove(done)
            out[i] = _raised(got)
        return [r for r in out if r is not None]

    def _lose_slot(self, s: int, calls: list[Any], running: dict[Any, tuple[int, int]],
                   out: list[Any], chunks: list[ConfigBatch], attempts: list[int]) -> list[int]:
        """The chunks to submit again after slot ``s``'s actor was lost, oldest first; the
        actor replaced. An actor runs its calls in order: those that finished keep their
        results, the first that did not is the one it was running (a fault, an attempt
        spent), and those queued behind it never started (submitted again, nothing lost)."""
        # ended first, so that every call of it resolves: a result that was on its way when
        # it died arrives (asking with no wait could miss it and charge a call that finished)
        self._end(self._slots[s])
        again, faulted = [], False
        for call in calls:
            i, _ = running.pop(call)
            try:
                got = self._ray.get(call, timeout=LOSS_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - lost with the actor
                if not faulted:
                    self._lost(exc, attempts[i], chunks[i])
                    attempts[i] += 1
                    faulted = True
                again.append(i)
                continue
            out[i] = _raised(got)
        self._slots[s] = self._new_slot()
        self._watched = False  # its process, once started, is watched too
        return again[::-1]  # inserted one by one at the front: oldest first

    def _send(self, slot: _Slot, chunk: ConfigBatch) -> Any:
        """Submit ``chunk`` to ``slot``'s actor, with the context and evaluator only if that
        actor does not hold them yet."""
        ctx = self._ctx_ref if slot.ctx_gen != self._ctx_gen else None
        evaluator = self._evaluator_ref if slot.evaluator_gen != self._evaluator_gen else None
        slot.ctx_gen, slot.evaluator_gen = self._ctx_gen, self._evaluator_gen
        return slot.actor.evaluate.remote(chunk, self._ctx_gen, ctx, evaluator)

    def _use_ctx(self, ctx: EvalContext) -> None:
        if ctx is not self._ctx:  # a new workload: to the object store once, for every actor
            self._ctx, self._ctx_ref = ctx, self._ray.put(ctx)
            self._ctx_gen += 1

    def _end(self, slot: _Slot) -> None:
        """End ``slot``'s actor (it may be alive but unreachable, or gone already)."""
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already
            pass

    # -- faults -------------------------------------------------------------------------------
    def _lost(self, exc: BaseException, attempt: int, batch: ConfigBatch) -> None:
        """Record the loss of ``batch``'s evaluation; the last attempt stops the study."""
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

    def take_faults(self) -> list[Fault]:
        faults, self._faults = self._faults, []
        return faults

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
        else:  # a Ray this pool did not start lives on: only its actors end
            for slot in self._slots:
                self._end(slot)
        self._slots = []
        if self._reaper is not None:
            self._reaper.release()


@dataclass
class _Slot:
    """One actor, what it was last sent (the ids of its context and evaluator) and the call
    that says it has started."""

    actor: Any
    ready: Any
    ctx_gen: int = 0  # the generations of what it holds (0: no context yet)
    evaluator_gen: int = 0


class _Worker:
    """A Ray actor's body: one worker process that keeps its evaluator and the workload's
    context between batches (imported and unpickled once, not once a task)."""

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator  # unpickling it imported its package, numpy, dse.core
        self._ctx: EvalContext | None = None
        self._ctx_gen = 0

    def ready(self) -> int:
        """The actor's process id, once it has started (its constructor ran)."""
        return os.getpid()

    def evaluate(self, batch: ConfigBatch, ctx_gen: int, ctx: EvalContext | None,
                 evaluator: Evaluator | None) -> list[EvalResult] | DseError | EvaluatorError:
        """:func:`_remote_evaluate` with the context and evaluator sent only when they change
        (``None``: the one kept)."""
        if ctx is not None:
            self._ctx, self._ctx_gen = ctx, ctx_gen
        if evaluator is not None:
            self._evaluator = evaluator
        if self._ctx is None or self._ctx_gen != ctx_gen:  # the pool's bookkeeping is wrong
            raise RuntimeError(f"actor holds context {self._ctx_gen}, was sent {ctx_gen}")
        return _remote_evaluate(self._evaluator, batch, self._ctx)


def _raised(results: Any) -> list[EvalResult]:
    """``results`` as returned by a worker, raised if it is the exception that stops the
    study."""
    if isinstance(results, BaseException):
        raise results
    return results


def make_pool(evaluator: Evaluator, workers: int, address: str | None) -> Pool:
    """Vectorised evaluators run in-process; others on Ray when more than one worker is asked
    for or a cluster address is given (Ray is imported and started only then)."""
    if evaluator.capabilities.score or (workers <= 1 and not address):
        return InProcessPool()
    return RayPool(workers, address, evaluator)


def shares_device(evaluator: Evaluator | None) -> bool:
    """Whether ``evaluator`` may run in several workers at once beside its device: it declares
    ``shares_device = True`` when it takes the device's lock itself for the part that must be
    exclusive (a measurement) and does the rest (compiling) outside it. Its Ray workers then
    hold no device resource, so one worker builds while another measures."""
    return bool(getattr(evaluator, "shares_device", False))


def ray_mode(evaluator: Evaluator | None, address: str | None) -> str:
    """Actors on a local Ray; tasks on a cluster (Ray places each on any node with a free CPU,
    one that joins later or outlives a lost one) and for an evaluator that declares a device
    (its resource is held a run at a time, not for an actor's life), unless the evaluator
    locks the device itself (:func:`shares_device`): then actors too, each building while
    another measures. ``DSE_RAY_POOL=tasks`` forces tasks."""
    forced = os.environ.get(MODE_ENV)
    if forced not in (None, "", ACTORS, TASKS):
        raise UsageError(f"{MODE_ENV}={forced}: one of {ACTORS}, {TASKS}")
    if forced == TASKS or address or (evaluator is not None and evaluator.device
                                      and not shares_device(evaluator)):
        return TASKS
    return ACTORS
