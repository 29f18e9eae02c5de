"""The event engine on tiny schedules whose timing can be checked by hand."""

from __future__ import annotations

import pytest

from evaluators.simulator.engine import Fifo, Semaphore, SharedServer, Sim


def test_events_fire_in_time_then_fifo_order():
    sim, log = Sim(), []
    for name, delay in (("b", 2.0), ("a", 1.0), ("c", 2.0), ("d", 0.0)):
        sim.timeout(delay).on_fire(lambda _, n=name: log.append((sim.now, n)))
    sim.run()
    assert log == [(0.0, "d"), (1.0, "a"), (2.0, "b"), (2.0, "c")]


def test_processes_wait_and_resume():
    sim, log = Sim(), []

    def worker(name, delays):
        for d in delays:
            yield sim.timeout(d)
            log.append((sim.now, name))

    done = sim.process(worker("x", [1.0, 2.0]))
    sim.process(worker("y", [1.5]))
    sim.run()
    assert log == [(1.0, "x"), (1.5, "y"), (3.0, "x")] and done.fired
    with pytest.raises(ValueError):
        sim.schedule(-1.0, lambda _: None)


def test_semaphore_serves_first_come_first_served():
    sim, log = Sim(), []
    sem = Semaphore(sim, 1)

    def user(name, hold):
        yield sem.acquire()
        log.append((sim.now, name))
        yield sim.timeout(hold)
        sem.release()

    for name in "abc":
        sim.process(user(name, 1.0))
    sim.run()
    assert log == [(0.0, "a"), (1.0, "b"), (2.0, "c")]


@pytest.mark.parametrize(("depth", "finish"), [(1, 9.0), (2, 7.0), (3, 7.0)])
def test_fifo_depth_lets_the_producer_run_ahead(depth, finish):
    # producer: 1 s per item; consumer: 2 s per item; 3 items. With depth 1 the producer must
    # wait for each item to be consumed before making the next one.
    sim = Sim()
    fifo = Fifo(sim, depth)
    made = []

    def producer():
        for _ in range(3):
            yield fifo.free.acquire()
            yield sim.timeout(1.0)
            made.append(sim.now)
            fifo.filled.release()

    def consumer():
        for _ in range(3):
            yield fifo.filled.acquire()
            yield sim.timeout(2.0)
            fifo.free.release()

    sim.process(producer())
    sim.process(consumer())
    sim.run()
    assert sim.now == finish
    assert made == ([1.0, 4.0, 7.0] if depth == 1 else [1.0, 2.0, 4.0] if depth == 2
                    else [1.0, 2.0, 3.0])


def test_shared_server_splits_bandwidth_and_caps():
    sim = Sim()
    server = SharedServer(sim, peak=100.0)
    ends = {}

    def job(name, nbytes, start=0.0, **kw):
        yield sim.timeout(start)
        yield server.transfer(nbytes, **kw)
        ends[name] = sim.now

    sim.process(job("a", 100.0, efficiency=1.0))
    sim.process(job("b", 100.0, efficiency=1.0))
    sim.run()
    assert ends == {"a": pytest.approx(2.0), "b": pytest.approx(2.0)}  # 50 B/s each

    sim, ends = Sim(), {}
    server = SharedServer(sim, peak=100.0)
    sim.process(job("slow", 10.0, efficiency=1.0, cap=10.0))  # capped: 10 B/s
    sim.process(job("fast", 90.0, efficiency=1.0))  # gets the other 90 B/s
    sim.run()
    assert ends == {"slow": pytest.approx(1.0), "fast": pytest.approx(1.0)}


def test_weights_efficiency_priority_and_late_arrivals():
    sim, ends = Sim(), {}
    server = SharedServer(sim, peak=100.0)

    def job(name, nbytes, start=0.0, **kw):
        yield sim.timeout(start)
        yield server.transfer(nbytes, **kw)
        ends[name] = sim.now

    # one job standing for 3 identical streams + one single stream: 4 equal shares of 25 B/s
    sim.process(job("three", 25.0, efficiency=1.0, weight=3))
    sim.process(job("one", 50.0, efficiency=1.0))
    sim.run()
    assert ends["three"] == pytest.approx(1.0)
    assert ends["one"] == pytest.approx(1.25)  # alone after 1 s: the last 25 B at 100 B/s
    assert server.bytes_moved == pytest.approx(125.0)

    sim, ends = Sim(), {}
    server = SharedServer(sim, peak=100.0)
    sim.process(job("half", 50.0, efficiency=0.5))  # short runs: 50 B/s when alone
    sim.process(job("late", 50.0, start=0.5, efficiency=1.0, priority=3.0))
    sim.run()
    # from 0.5 s "late" gets 3/4 of the time (75 B/s) and "half" 1/4 (12.5 B/s)
    assert ends["late"] == pytest.approx(0.5 + 50 / 75)
    assert ends["half"] == pytest.approx(0.5 + 50 / 75 + (50 - 25 - 12.5 * 50 / 75) / 50)
    assert server.busy_time == pytest.approx(ends["half"])
