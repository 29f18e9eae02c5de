"""Running a simulation to the end: exact for short runs, period-extrapolated for long ones."""

from __future__ import annotations

from dataclasses import dataclass

from evaluators.simulator.gemm_sim import (
    EXACT_ROUNDS,
    WARMUP_ROUNDS,
    GemmSimulation,
    Plan,
    Stats,
    Trace,
)


@dataclass(frozen=True)
class Outcome:
    """Totals for the whole GEMM (extrapolated where rounds were not simulated)."""

    end_s: float
    stats: Stats
    dram_busy_s: float
    dram_bytes: float
    rounds_simulated: int
    events: int


def _scaled(last: Stats, per_round: Stats, rounds: int) -> Stats:
    return Stats(**{k: getattr(last, k) + rounds * getattr(per_round, k) for k in vars(last)})


def _delta(a: Stats, b: Stats) -> Stats:
    return Stats(**{k: getattr(b, k) - getattr(a, k) for k in vars(a)})


def simulate(plan: Plan, full: bool = False, trace: Trace | None = None,
             extrapolate: bool = True) -> Outcome:
    """Simulate ``plan``. Runs of more than :data:`EXACT_ROUNDS` rounds simulate a prefix, take
    the steady period between two middle rounds (checked against the round before) and add it
    for every round not simulated; the prefix's last rounds supply the end of the run."""
    rounds = plan.rounds
    if full or not extrapolate or rounds <= EXACT_ROUNDS:
        sim = GemmSimulation(plan, rounds, full, trace)
        end = sim.run()
        return Outcome(end, sim.stats, sim.dram.busy_time, sim.dram.bytes_moved, rounds,
                       sim.sim.events_processed)
    window, events = WARMUP_ROUNDS, 0
    while True:
        sim = GemmSimulation(plan, window, full=False, trace=trace)
        end = sim.run()
        events += sim.sim.events_processed
        snaps = sim.snapshots
        mid = window // 2
        period = snaps[mid][0] - snaps[mid - 1][0]
        before = snaps[mid - 1][0] - snaps[mid - 2][0]
        if abs(period - before) <= 1e-9 * max(period, 1e-12) or window * 2 > rounds:
            break
        window *= 2
        if trace is not None:
            trace.spans.clear()
    if abs(period - before) > 1e-9 * max(period, 1e-12):  # no steady state: simulate it all
        sim = GemmSimulation(plan, rounds, full=False, trace=trace)
        end = sim.run()
        return Outcome(end, sim.stats, sim.dram.busy_time, sim.dram.bytes_moved, rounds,
                       events + sim.sim.events_processed)
    missing = rounds - window
    step = _delta(snaps[mid - 1][1], snaps[mid][1])
    return Outcome(
        end_s=end + missing * period,
        stats=_scaled(sim.stats, step, missing),
        dram_busy_s=sim.dram.busy_time + missing * (snaps[mid][2] - snaps[mid - 1][2]),
        dram_bytes=sim.dram.bytes_moved + missing * (snaps[mid][3] - snaps[mid - 1][3]),
        rounds_simulated=window, events=events)
