"""Event simulation of one GEMM on the XDNA array: every transfer and kernel call.

Actors (each a process of :mod:`evaluators.simulator.engine`):

* a DRAM reader per A tile and per B tile stream: for each output tile ("round") it waits for
  the round's buffer descriptors, then moves the round's k_mt chunks from DRAM into the MemTile
  (a free L2 buffer each), through its shim channel and the shared DRAM;
* a MemTile sender per A and B tile: splits each chunk into L1 tiles and broadcasts each to the
  cores of its row (A) or column (B), waiting until every destination FIFO has a free buffer;
* a core per compute tile: per round it takes a free C buffer, zeroes it, runs K/k_ct kernel
  calls (each waits for its A and B tiles and frees them after), then hands C to its drain;
* a drain per core (C to the MemTile join) and a DRAM writer per column, which waits for the
  column's joined C tiles, writes them out and completes the round's buffer descriptors;
* the command processor: BDs for round r are issued when round r-5's C completes (overlapped
  5+5+5 queue) or, sequentially, one command latency after round r-1's C completes.

*Symmetry.* Every core runs the same schedule, every B stream and every column the same, and
DRAM is shared in equal parts by identical streams. The reduced simulation therefore runs one
actor of each kind and gives its DRAM transfers the weight of the identical streams it stands
for (A tiles, B tiles, columns): DRAM sees exactly the same load. This assumes identical tiles
(no ragged edges: sizes are padded to whole tiles) and equal sharing of DRAM between identical
streams; a test checks it against the full simulation on small problems. After warm-up the
rounds repeat with a fixed period, so long runs simulate the first rounds and extrapolate the
period (checked to have converged), again tested against the exact run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dse.core.params import ConfigBatch
from dse.core.workload import GemmWorkload
from evaluators.analytical.xdna_dram import run_bandwidth, stream_runs
from evaluators.simulator.engine import Fifo, SharedServer, Sim
from search_spaces.xdna_gemm.geometry import derive
from search_spaces.xdna_gemm.kernel import kernel_cycles, zero_cycles
from search_spaces.xdna_gemm.target import XdnaTarget

OVERLAPPED_QUEUE = 5  # BDs kept queued per operand in the overlapped scheme
EXACT_ROUNDS = 16  # up to this many rounds are simulated in full
WARMUP_ROUNDS = 12  # otherwise: simulate this many, measure the period, extrapolate


@dataclass(frozen=True)
class Plan:
    """Sizes and times of one config (seconds and bytes), independent of the actors."""

    rounds: int
    calls: int  # kernel calls per round
    call_s: float
    zero_s: float
    a_par: int
    b_par: int
    cols: int
    a_chunks: int  # DRAM chunks per round per A stream
    b_chunks: int
    a_chunk_bytes: float
    b_chunk_bytes: float
    c_join_bytes: float  # one column's joined C tiles
    a_tile_s: float  # MemTile -> L1 transfer of one A tile
    b_tile_s: float
    a_tiles_per_chunk: int
    b_tiles_per_chunk: int
    drain_s: float
    eff_a: float
    eff_b: float
    eff_c: float
    dram_peak: float
    channel_bps: float
    setup_s: float
    depth: dict[str, int]
    sequential_bds: bool
    command_s: float
    a_cols: bool
    macs_useful: float
    dispatch_s: float
    t_comp_s: float
    write_priority: float


def make_plan(batch: ConfigBatch, target: XdnaTarget, workload: GemmWorkload) -> Plan:
    """The :class:`Plan` of the first config of ``batch``: its sizes, DRAM efficiencies and transfer
    times, with the simulator's DRAM constants."""
    geo = derive(batch, target, workload)
    clock = target.array.clock_hz
    bw = target.dma.channel_bytes_per_cycle
    sim_spec = target.simulator
    dram = replace(target.dram, peak_bytes_per_s=sim_spec.dram_peak_bytes_per_s,
                   run_knee_bytes=sim_spec.dram_run_knee_bytes)
    m, k, n, kmt = (int(x[0]) for x in (geo.m, geo.k, geo.n, geo.kmt))
    a_par, b_par = int(batch["m_rows"][0]), int(batch["n_cols"][0])
    col_major = bool(geo.b_col_major[0])
    call = kernel_cycles(geo.m, geo.k, geo.n, geo.spec, target.kernel, geo.ty_c).total[0]
    rounds = int(geo.M[0] // (m * a_par) * (geo.N[0] // (n * b_par)))
    calls = int(geo.K[0] // k)

    def eff(run: np.ndarray, write: bool = False) -> float:
        return float(run_bandwidth(np.asarray(run, dtype=float), dram, write)[()]
                     / dram.peak_bytes_per_s)

    runs = stream_runs(geo, batch["m_rows"], batch["n_cols"], dram)
    return Plan(
        rounds=rounds, calls=calls, call_s=call / clock,
        zero_s=float(zero_cycles(geo.m, geo.n, target.kernel, geo.ty_c)[0]) / clock,
        a_par=a_par, b_par=b_par, cols=int(geo.cols_used[0]),
        a_chunks=int(geo.K[0] // kmt), b_chunks=int(geo.K[0] // (kmt if col_major else k)),
        a_chunk_bytes=m * kmt * geo.ty_a,
        b_chunk_bytes=(kmt if col_major else k) * n * geo.ty_b,
        c_join_bytes=float(geo.l2_c_join[0]),
        a_tile_s=m * k * geo.ty_a / bw / clock, b_tile_s=k * n * geo.ty_b / bw / clock,
        a_tiles_per_chunk=kmt // k, b_tiles_per_chunk=kmt // k if col_major else 1,
        drain_s=m * n * geo.ty_c / bw / clock,
        eff_a=eff(runs.a[0]), eff_b=eff(runs.b[0]), eff_c=eff(runs.c[0], write=True),
        dram_peak=dram.peak_bytes_per_s, channel_bps=bw * clock,
        setup_s=sim_spec.dma_setup_cycles / clock,
        depth={name: int(batch[name][0]) for name in
               ("buf_a_l1", "buf_b_l1", "buf_c_l1", "buf_a_l2", "buf_b_l2", "buf_c_l2")},
        sequential_bds=bool(batch["bd_scheme"][0] == 1),
        command_s=sim_spec.command_latency_s, a_cols=bool(geo.a_cols[0]),
        macs_useful=float(workload.macs), dispatch_s=target.overheads.dispatch_s,
        t_comp_s=rounds * calls * call / clock,
        write_priority=sim_spec.write_priority,
    )


@dataclass
class Stats:
    """Busy and stall time per actor kind (of the representative actor), in seconds."""

    core_busy: float = 0.0
    zero: float = 0.0
    wait_inputs: float = 0.0
    wait_bds: float = 0.0
    wait_c: float = 0.0
    shim_a: float = 0.0
    shim_b: float = 0.0
    shim_c: float = 0.0
    memtile_a: float = 0.0
    memtile_b: float = 0.0
    drain: float = 0.0

    def copy(self) -> Stats:
        return Stats(**vars(self))


@dataclass
class Trace:
    """Spans (track, name, start, end) for a Chrome trace-event timeline."""

    spans: list[tuple[str, str, float, float]] = field(default_factory=list)

    def add(self, track: str, name: str, start: float, end: float) -> None:
        self.spans.append((track, name, start, end))


class GemmSimulation:
    """Actors of one config on every core (``full``) or one actor of each kind (reduced)."""

    def __init__(self, plan: Plan, rounds: int, full: bool, trace: Trace | None = None) -> None:
        self.plan, self.rounds, self.full, self.trace = plan, rounds, full, trace
        self.sim = sim = Sim()
        self.dram = SharedServer(sim, plan.dram_peak)
        self.stats = Stats()
        self.snapshots: list[tuple[float, Stats, float, float]] = []
        p = plan
        a_tiles = range(p.a_par if full else 1)
        b_tiles = range(p.b_par if full else 1)
        self.weight = {"a": 1 if full else p.a_par, "b": 1 if full else p.b_par,
                       "c": 1 if full else p.cols}
        self.cores = [(i, j) for i in a_tiles for j in b_tiles]
        # a core's column: B runs down the columns unless the orientation is swapped
        self.column = {c: (c[0] if p.a_cols else c[1]) for c in self.cores}
        columns = sorted(set(self.column.values()))
        rounds_range = range(rounds)
        self.bd_ready = {col: [sim.event() for _ in rounds_range] for col in columns}
        self.round_done = {col: [sim.event() for _ in rounds_range] for col in columns}
        self.join_slot = {col: [sim.event() for _ in rounds_range] for col in columns}
        self.drained = {c: [sim.event() for _ in rounds_range] for c in self.cores}
        self.l2 = {("a", i): Fifo(sim, p.depth["buf_a_l2"]) for i in a_tiles}
        self.l2.update({("b", j): Fifo(sim, p.depth["buf_b_l2"]) for j in b_tiles})
        self.l1 = {("a", c): Fifo(sim, p.depth["buf_a_l1"]) for c in self.cores}
        self.l1.update({("b", c): Fifo(sim, p.depth["buf_b_l1"]) for c in self.cores})
        self.c_l1 = {c: Fifo(sim, p.depth["buf_c_l1"]) for c in self.cores}
        self.join = {col: Fifo(sim, p.depth["buf_c_l2"]) for col in columns}
        # when round r's BDs let the representative readers start (for the stall breakdown)
        self.bd_open = {"a": [0.0] * rounds, "b": [0.0] * rounds}
        for op, tiles, count in (("a", a_tiles, p.a_par), ("b", b_tiles, p.b_par)):
            for index in tiles:
                sim.process(self._reader(op, index, self._shim_of(op, index, count)))
                sim.process(self._sender(op, index))
        for c in self.cores:
            sim.process(self._core(c))
            sim.process(self._drain(c))
        for col in columns:
            sim.process(self._joiner(col))
            sim.process(self._writer(col))
            self._command_processor(col)

    def _shim_of(self, op: str, index: int, count: int) -> int:
        """The column whose shim streams a tile: the tile's own column when its operand runs
        down the columns, else the columns spread evenly (XDNA2's 4 A tiles: columns 0,2,4,6)."""
        if not self.full:
            return 0
        cols = self.plan.cols
        if (op == "b") != self.plan.a_cols:
            return index
        return (index * cols) // count if count <= cols else index % cols

    # -- actors --------------------------------------------------------------------------------
    def _command_processor(self, col: int) -> None:
        p, ready, done = self.plan, self.bd_ready[col], self.round_done[col]
        ahead = 1 if p.sequential_bds else OVERLAPPED_QUEUE
        for r in range(self.rounds):
            if r < ahead:
                ready[r].succeed()
            else:
                done[r - ahead].on_fire(lambda _, e=ready[r]: e.succeed(None, p.command_s))

    def _reader(self, op: str, index: int, col: int) -> Any:
        p, sim, stats = self.plan, self.sim, self.stats
        chunks = p.a_chunks if op == "a" else p.b_chunks
        nbytes = p.a_chunk_bytes if op == "a" else p.b_chunk_bytes
        efficiency = p.eff_a if op == "a" else p.eff_b
        l2, record = self.l2[(op, index)], index == 0
        for r in range(self.rounds):
            if not self.bd_ready[col][r].fired:
                yield self.bd_ready[col][r]
            if record:
                self.bd_open[op][r] = sim.now
            for chunk in range(chunks):
                # one BD task per round: its start-up (the descriptor loaded) comes once, and
                # before the task waits on the L2 buffer's lock, as a DMA channel runs a BD
                setup = p.setup_s if chunk == 0 else 0.0
                if setup:
                    yield sim.timeout(setup)
                yield l2.free.acquire()
                start = sim.now
                yield self.dram.transfer(nbytes, efficiency, self.weight[op], p.channel_bps)
                if record:
                    busy = setup + sim.now - start
                    setattr(stats, f"shim_{op}", getattr(stats, f"shim_{op}") + busy)
                    self._span(f"shim {op.upper()} (DRAM read)", f"round {r}", start)
                l2.filled.release()

    def _sender(self, op: str, index: int) -> Any:
        p, sim, stats = self.plan, self.sim, self.stats
        chunks = p.a_chunks if op == "a" else p.b_chunks
        per_chunk = p.a_tiles_per_chunk if op == "a" else p.b_tiles_per_chunk
        tile_s = p.a_tile_s if op == "a" else p.b_tile_s
        side = 0 if op == "a" else 1
        targets = [self.l1[(op, c)] for c in self.cores if c[side] == index]
        source, record = self.l2[(op, index)], index == 0
        for _ in range(self.rounds):
            for _ in range(chunks):
                yield source.filled.acquire()
                for _ in range(per_chunk):
                    for fifo in targets:  # a broadcast waits for every destination
                        yield fifo.free.acquire()
                    start = sim.now
                    yield sim.timeout(tile_s)
                    if record:
                        setattr(stats, f"memtile_{op}",
                                getattr(stats, f"memtile_{op}") + sim.now - start)
                        self._span(f"MemTile {op.upper()} -> L1", "tile", start)
                    for fifo in targets:
                        fifo.filled.release()
                source.free.release()

    def _core(self, core: tuple[int, int]) -> Any:
        p, sim, s = self.plan, self.sim, self.stats
        record = core == (0, 0)
        a, b, c = self.l1[("a", core)], self.l1[("b", core)], self.c_l1[core]
        for r in range(self.rounds):
            t = sim.now
            yield c.free.acquire()
            if record:
                s.wait_c += sim.now - t
                s.zero += p.zero_s
            yield sim.timeout(p.zero_s)
            for _ in range(p.calls):
                t = sim.now
                yield a.filled.acquire()
                yield b.filled.acquire()
                start = sim.now
                if record:  # waiting before the round's BDs were issued is waiting for BDs
                    gate = max(self.bd_open["a"][r], self.bd_open["b"][r])
                    for_bds = max(0.0, min(start, gate) - t)
                    s.wait_bds += for_bds
                    s.wait_inputs += start - t - for_bds
                yield sim.timeout(p.call_s)
                if record:
                    s.core_busy += p.call_s
                    self._span("core (0,0)", "kernel", start)
                a.free.release()
                b.free.release()
            c.filled.release()

    def _joiner(self, col: int) -> Any:
        """One MemTile join buffer takes all of a column's C tiles of a round."""
        for r in range(self.rounds):
            yield self.join[col].free.acquire()
            self.join_slot[col][r].succeed()

    def _drain(self, core: tuple[int, int]) -> Any:
        p, sim = self.plan, self.sim
        c, col, record = self.c_l1[core], self.column[core], core == (0, 0)
        for r in range(self.rounds):
            yield c.filled.acquire()
            yield self.join_slot[col][r]
            start = sim.now
            yield sim.timeout(p.drain_s)
            if record:
                self.stats.drain += sim.now - start
                self._span("core (0,0) C drain", f"round {r}", start)
            c.free.release()
            self.drained[core][r].succeed()

    def _writer(self, col: int) -> Any:
        p, sim = self.plan, self.sim
        cores = [c for c in self.cores if self.column[c] == col]
        record = (0, 0) in cores
        for r in range(self.rounds):
            yield self.bd_ready[col][r]
            yield sim.timeout(p.setup_s)  # the write task starts up before its data is there
            for core in cores:
                yield self.drained[core][r]
            start = sim.now
            yield self.dram.transfer(p.c_join_bytes, p.eff_c, self.weight["c"], p.channel_bps,
                                     p.write_priority)
            self.join[col].free.release()
            if record:
                self.stats.shim_c += p.setup_s + sim.now - start
                self._span("shim C (DRAM write)", f"round {r}", start)
                self.snapshots.append((sim.now, self.stats.copy(), self.dram.busy_time,
                                       self.dram.bytes_moved))
            self.round_done[col][r].succeed()

    def _span(self, track: str, name: str, start: float) -> None:
        if self.trace is not None:
            self.trace.add(track, name, start, self.sim.now)

    def run(self) -> float:
        """Simulate; returns the time the last round's C reached DRAM."""
        self.sim.run()
        unfinished = [col for col, done in self.round_done.items() if not done[-1].fired]
        if unfinished:  # a deadlock would be a bug in the actors, never a config's property
            raise RuntimeError(f"simulation stalled before the end (columns {unfinished})")
        return self.sim.now
