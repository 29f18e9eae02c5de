"""A small discrete-event engine: generator processes, events, semaphores, and a shared
bandwidth server.

A process is a generator that yields :class:`Event` objects and is resumed when they fire, with
the event's value. Events fire in time order; events at the same time fire in the order they
were scheduled (FIFO), which makes runs deterministic.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

ProcessGen = Generator["Event", Any, None]


class Event:
    """Something that happens once; processes waiting on it resume when it fires."""

    __slots__ = ("sim", "callbacks", "fired", "value")

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.callbacks: list[Callable[[Any], None]] = []
        self.fired = False
        self.value: Any = None

    def succeed(self, value: Any = None, delay: float = 0.0) -> Event:
        """Fire now (or after ``delay``): waiting processes resume in the order they waited."""
        self.sim.schedule(delay, self._fire, value)
        return self

    def _fire(self, value: Any) -> None:
        if self.fired:
            raise RuntimeError("event fired twice")
        self.fired, self.value = True, value
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(value)

    def on_fire(self, callback: Callable[[Any], None]) -> None:
        if self.fired:
            self.sim.schedule(0.0, callback, self.value)
        else:
            self.callbacks.append(callback)


class Sim:
    """The event loop: a clock and a heap of scheduled calls."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        self.events_processed = 0

    def schedule(self, delay: float, fn: Callable[[Any], None], value: Any = None) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay, self._seq, fn, value))

    def timeout(self, delay: float) -> Event:
        return Event(self).succeed(None, delay)

    def event(self) -> Event:
        return Event(self)

    def process(self, gen: ProcessGen) -> Event:
        """Start a process; the returned event fires when it finishes."""
        done = Event(self)

        def step(value: Any) -> None:
            try:
                waited = gen.send(value)
            except StopIteration:
                done._fire(None)
                return
            waited.on_fire(step)

        self.schedule(0.0, step, None)
        return done

    def run(self, until: float | None = None) -> None:
        heap = self._heap
        while heap:
            time, _, fn, value = heap[0]
            if until is not None and time > until:
                break
            heapq.heappop(heap)
            self.now = time
            self.events_processed += 1
            fn(value)


class Semaphore:
    """``count`` tokens; :meth:`acquire` waits for one, first come first served.

    An object FIFO of depth d is two semaphores: free slots (d tokens) taken by the producer,
    filled slots (0 tokens) taken by the consumer.
    """

    def __init__(self, sim: Sim, count: int) -> None:
        self.sim = sim
        self.count = count
        self._waiting: deque[Event] = deque()

    def acquire(self) -> Event:
        event = Event(self.sim)
        if self.count > 0 and not self._waiting:
            self.count -= 1
            event.succeed()
        else:
            self._waiting.append(event)
        return event

    def release(self) -> None:
        if self._waiting:
            self._waiting.popleft().succeed()
        else:
            self.count += 1


class Fifo:
    """An object FIFO of ``depth`` buffers between one producer and one consumer."""

    def __init__(self, sim: Sim, depth: int) -> None:
        self.free = Semaphore(sim, depth)
        self.filled = Semaphore(sim, 0)


@dataclass
class _Job:
    remaining: float  # bytes left, per physical stream
    efficiency: float  # fraction of the server's peak this stream's bytes get
    weight: int  # identical physical streams this job stands for
    cap: float  # bytes/s one physical stream may not exceed
    priority: float  # relative share of server time per physical stream
    done: Event
    rate: float = 0.0  # bytes/s per physical stream
    on_finish: Callable[[], None] | None = None


@dataclass
class SharedServer:
    """A bandwidth shared by concurrent transfers (DRAM): processor sharing with caps.

    Each physical stream gets a share of the server's time in proportion to its priority (equal
    by default); a stream whose bytes move at efficiency e gets ``share * peak * e`` bytes/s, but
    never more than its cap (its DMA channel); time a capped stream cannot use goes to the
    others (water-filling). A job of
    weight w stands for w identical streams that start and end together.
    """

    sim: Sim
    peak: float
    jobs: list[_Job] = field(default_factory=list)
    busy_time: float = 0.0
    bytes_moved: float = 0.0
    _last: float = 0.0
    _version: int = 0

    def transfer(self, nbytes: float, efficiency: float, weight: int = 1,
                 cap: float = float("inf"), priority: float = 1.0) -> Event:
        self._advance()
        done = Event(self.sim)
        if nbytes <= 0:
            return done.succeed()
        self.jobs.append(_Job(nbytes, efficiency, weight, cap, priority, done))
        self._replan()
        return done

    def _advance(self) -> None:
        elapsed = self.sim.now - self._last
        if elapsed > 0 and self.jobs:
            self.busy_time += elapsed
            for job in self.jobs:
                moved = job.rate * elapsed
                job.remaining -= moved
                self.bytes_moved += moved * job.weight
        self._last = self.sim.now

    def _replan(self) -> None:
        # water-filling of server time over physical streams, in proportion to priority
        pending = sorted(self.jobs,
                         key=lambda j: j.cap / (self.peak * j.efficiency * j.priority))
        time_left, shares_left = 1.0, sum(j.weight * j.priority for j in pending)
        for job in pending:
            share = time_left * job.priority / shares_left
            rate = min(share * self.peak * job.efficiency, job.cap)
            job.rate = rate
            time_left -= job.weight * rate / (self.peak * job.efficiency)
            shares_left -= job.weight * job.priority
        self._version += 1
        nxt = min(self.jobs, key=lambda j: j.remaining / j.rate, default=None)
        if nxt is not None:
            version = self._version
            self.sim.schedule(max(nxt.remaining / nxt.rate, 0.0),
                              lambda _: self._complete(version))

    def _complete(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later arrival or departure
        self._advance()
        finished = [j for j in self.jobs if j.remaining <= 1e-9 * max(1.0, j.rate)]
        self.jobs = [j for j in self.jobs if j not in finished]
        for job in finished:
            job.done._fire(None)
        self._replan()
