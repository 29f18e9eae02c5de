"""Fold-schedule simulation of a GEMM on a systolic array, cycle-exact against SCALE-Sim 3.0.

SCALE-Sim 3.0 simulates a GEMM by building, for every cycle, the address every array edge PE
reads or writes (its *demand matrices*), and then pushing those matrices line by line (one line
per cycle) through three scratchpad models: two double-buffered read buffers (ifmap, filter) in
front of DRAM and one write buffer (ofmap) that drains to DRAM. That costs time and memory in
proportion to M*N*K / array size (minutes for 1024^3 on 32x32).

This module computes the same report from the *fold schedule* instead. The work is cut into folds
(fc outer, fr inner, as SCALE-Sim orders them); every fold has the same number of demand lines
and at most four kinds of fold exist (last row fold and/or last column fold or neither), so the
number of addresses an operand touches in any line is a closed form of (fold kind, line in fold).
On that we run SCALE-Sim's buffer mechanisms as events, not per address:

* the ofmap write buffer (both modes): elements fill it line by line; when less than its active
  half is free and the previous drain has ended it flushes the partial DRAM line and drains
  ``ceil(drain half / bandwidth)`` lines, one per cycle; storing into a full buffer while a drain
  is running stalls the array until the drain ends. We jump from drain to drain and stall to
  stall with prefix sums of the per-line write counts, reproducing SCALE-Sim's quirks (a flushed
  partial line counts as full when it is not the last line of a drain, which also inflates the
  free space).
* CALC bandwidth (SCALE-Sim's ``ReadBufferEstimateBw``): reads never stall; the buffer records
  new addresses in sets of ``floor(words / 100)`` and forgets everything every 50 sets, so DRAM
  reads are the addresses requested that were not recorded since the last multiple of
  ``E = 50 * floor(words / 100)`` misses. Every fold re-reads a block of an operand in the same
  order, so a fold's misses are always a prefix of it, in closed form per reuse pattern (blocks
  revisited cyclically, blocks re-read back to back, blocks read once). The bandwidth averages
  need only the cycle of the last set-of-50 boundary, found by locating that miss's line.
* USER bandwidth (SCALE-Sim's ``read_buffer``): the operand's prefetch order is cut into sets of
  ``ceil(words / 100)`` words; a window of the sets (the active half) is resident, and each miss
  slides it by the prefetch half's sets (wrapping round the operand) with one DRAM prefetch whose
  data arrive at a fixed time ``k * (ceil(prefetch half / bandwidth) + 1) - 1``. A demand line's
  addresses are a contiguous run of the prefetch order, so only its first and last set matter;
  we scan the lines vectorised for the few where the window must move. The stall a prefetch adds
  follows SCALE-Sim's arithmetic exactly (it counts a pending wait twice and lets a prefetch that
  arrived early pull the time back).

Per cycle the array stalls by the largest of the three buffers' stalls, as in SCALE-Sim.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass

import numpy as np

from dse.core.errors import UsageError
from search_spaces.systolic_gemm.target import DATAFLOWS

BANDWIDTH_MODES = ("CALC", "USER")

#: SCALE-Sim's read buffers talk to DRAM with this many words per cycle in USER mode unless its
#: config's ``[layout] IfmapSRAMBankBandwidth`` / ``FilterSRAMBankBandwidth`` say otherwise; in
#: CALC mode its bandwidth estimator starts from the same number (hard-coded there).
DEFAULT_READ_BANDWIDTH = 10
_CALC_READ_BANDWIDTH = 10
#: Chunk of demand lines scanned at once for USER-mode window misses.
_SCAN_CHUNK = 1 << 20


def _positive_int(name: str, value: object) -> int:
    """``value`` if it is a positive int (bools refused), else a UsageError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class ArraySetup:
    """A systolic array and its scratchpads, as a SCALE-Sim 3.0 config describes them.

    ``rows`` x ``cols`` PEs (SCALE-Sim's ArrayHeight x ArrayWidth); ``dataflow`` ``"os"``, ``"ws"``
    or ``"is"``; SRAM sizes in kB of 1-byte words (SCALE-Sim's Ifmap/Filter/OfmapSramSzkB), each
    split in halves (active and prefetch / drain). ``bandwidth`` is SCALE-Sim's
    ``InterfaceBandwidth``: ``"CALC"`` estimates the DRAM bandwidth the run needs (reads never
    stall, the ofmap drains ``cols`` words per cycle), ``"USER"`` models a fixed bandwidth.

    ``user_bandwidth`` is SCALE-Sim's ``Bandwidth`` field (its first value), in words per cycle,
    USER mode only (CALC ignores it, as SCALE-Sim does). SCALE-Sim 3.0 uses it for one thing:
    the ofmap write buffer's drain to DRAM (writes, ofmap only).
    It does *not* set the read bandwidth: the ifmap and filter read buffers prefetch at the
    ``[layout]`` section's ``IfmapSRAMBankBandwidth`` and ``FilterSRAMBankBandwidth`` (10 unless
    set), which are ``ifmap_read_bandwidth`` and ``filter_read_bandwidth`` here. SCALE-Sim takes
    integers only (the write buffer packs ``Bandwidth`` words per DRAM line); a fractional
    ``user_bandwidth`` is rounded down here, to 1 at least.
    """

    rows: int
    cols: int
    dataflow: str
    ifmap_sram_kb: float
    filter_sram_kb: float
    ofmap_sram_kb: float
    bandwidth: str = "CALC"
    user_bandwidth: float | None = None
    ifmap_read_bandwidth: int = DEFAULT_READ_BANDWIDTH
    filter_read_bandwidth: int = DEFAULT_READ_BANDWIDTH

    def __post_init__(self) -> None:
        _positive_int("rows", self.rows)
        _positive_int("cols", self.cols)
        if self.dataflow not in DATAFLOWS:
            raise UsageError(f"dataflow must be one of {', '.join(DATAFLOWS)}, "
                             f"got {self.dataflow!r}")
        for name in ("ifmap_sram_kb", "filter_sram_kb", "ofmap_sram_kb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                    or not math.isfinite(value) or math.floor(1024 * value) < 100:
                # Below 100 words SCALE-Sim's buffers have empty sets and never fill.
                raise UsageError(f"{name} must be a size in kB of at least 100 bytes, "
                                 f"got {value!r}")
        if self.bandwidth not in BANDWIDTH_MODES:
            raise UsageError(f"bandwidth must be CALC or USER, got {self.bandwidth!r}")
        if self.bandwidth == "USER":
            value = self.user_bandwidth
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                    or not math.isfinite(value) or value <= 0:
                raise UsageError(f"user_bandwidth must be a positive number of words per "
                                 f"cycle with USER bandwidth, got {value!r}")
        _positive_int("ifmap_read_bandwidth", self.ifmap_read_bandwidth)
        _positive_int("filter_read_bandwidth", self.filter_read_bandwidth)


@dataclass(frozen=True)
class FoldReport:
    """SCALE-Sim 3.0's report of one GEMM layer, each field as SCALE-Sim computes it.

    ``total_cycles`` is COMPUTE_REPORT's "Total Cycles (incl. prefetch)" (printed "Total cycles"):
    from the first DRAM read of the initial prefetch (negative cycles) to the last ofmap DRAM
    write. ``compute_cycles`` is its "Total Cycles" (printed "Compute cycles"): the cycle the last
    demand line is served, stalls included. ``stall_cycles``: cycles the array waited on memory.
    ``overall_util_pct`` = MACs / (compute_cycles x PEs); ``mapping_eff_pct``: mean over folds of
    the PEs a fold maps; ``compute_util_pct``: mean over folds of MACs / (PEs x the fold's cycles).
    SRAM counts are the array's accesses (SCALE-Sim's OS ofmap count adds rows + cols per fold);
    DRAM counts are the buffers' (USER reads count whole DRAM request lines). ``avg_*_bw`` are
    BANDWIDTH_REPORT's words per cycle; the start/stop cycles are DETAILED_ACCESS_REPORT's.
    """

    total_cycles: int
    compute_cycles: int
    stall_cycles: int
    overall_util_pct: float
    mapping_eff_pct: float
    compute_util_pct: float
    sram_ifmap_reads: int
    sram_filter_reads: int
    sram_ofmap_writes: int
    dram_ifmap_reads: int
    dram_filter_reads: int
    dram_ofmap_writes: int
    avg_ifmap_sram_bw: float
    avg_filter_sram_bw: float
    avg_ofmap_sram_bw: float
    avg_ifmap_dram_bw: float
    avg_filter_dram_bw: float
    avg_ofmap_dram_bw: float
    sram_ifmap_start_cycle: int
    sram_ifmap_stop_cycle: int
    sram_filter_start_cycle: int
    sram_filter_stop_cycle: int
    sram_ofmap_start_cycle: int
    sram_ofmap_stop_cycle: int
    dram_ifmap_start_cycle: int
    dram_ifmap_stop_cycle: int
    dram_filter_start_cycle: int
    dram_filter_stop_cycle: int
    dram_ofmap_start_cycle: int
    dram_ofmap_stop_cycle: int
    row_folds: int
    col_folds: int

    def to_dict(self) -> dict[str, float | int]:
        """The fields by name."""
        return asdict(self)


# ------------------------------------------------------------------------------------------
# Fold geometry


def _band(length: int, width: int, lo: int, hi: int) -> np.ndarray:
    """Per line ``l < length``: how many ``c in [0, width)`` have ``lo <= l - c <= hi``.

    A skewed demand matrix feeds PE column ``c`` the element of time ``l - c`` in line ``l``;
    this counts the valid elements of a line when valid times are ``[lo, hi]``."""
    lines = np.arange(length, dtype=np.int64)
    first = np.maximum(0, lines - hi)
    last = np.minimum(width - 1, lines - lo)
    return np.maximum(last - first + 1, 0)


def _flipped_rows(length: int, rows: int, used_rows: int, width: int) -> np.ndarray:
    """Per line: ``width`` for lines ``rows - used_rows .. rows - 1``, else 0.

    An unskewed, row-flipped block (WS filter, IS ifmap) is fed one row per line, bottom row
    first, padded rows (beyond ``used_rows``) first of all."""
    lines = np.arange(length, dtype=np.int64)
    return np.where((lines >= rows - used_rows) & (lines < rows), width, 0).astype(np.int64)


class _LineCounts:
    """How many addresses one stream (an operand's reads or the ofmap writes) has in each demand
    line of the whole run, from per-fold-kind tables: prefix sums and their inverse."""

    def __init__(self, kind_of_fold: np.ndarray, per_kind: list[np.ndarray], lines: int):
        self.lines = lines
        self.kind = kind_of_fold
        self.per_kind = per_kind
        self.cum_kind = [np.concatenate(([0], np.cumsum(c))) for c in per_kind]
        totals = np.array([c[-1] for c in self.cum_kind], dtype=np.int64)
        self.fold_size = totals[kind_of_fold]
        self.fold_cum = np.concatenate(([0], np.cumsum(self.fold_size)))
        self.total = int(self.fold_cum[-1])

    def before(self, line: int) -> int:
        """Addresses in lines ``< line`` (``line`` up to the number of lines)."""
        fold, pos = divmod(line, self.lines)
        if fold >= len(self.kind):
            return self.total
        return int(self.fold_cum[fold] + self.cum_kind[self.kind[fold]][pos])

    def count(self, line: int) -> int:
        """Addresses in ``line``."""
        fold, pos = divmod(line, self.lines)
        return int(self.per_kind[self.kind[fold]][pos])

    def line_of(self, element: int) -> int:
        """The line holding the 0-based ``element``-th address of the stream."""
        fold = int(np.searchsorted(self.fold_cum, element, side="right")) - 1
        return self.line_in_fold(fold, element - int(self.fold_cum[fold]))

    def line_in_fold(self, fold: int, element: int) -> int:
        """The line (global) holding the ``element``-th address of ``fold``'s traversal."""
        cum = self.cum_kind[self.kind[fold]]
        return fold * self.lines + int(np.searchsorted(cum, element, side="right")) - 1

    def first_line(self) -> int:
        """The first line with an address."""
        return self.line_of(0)

    def last_line(self) -> int:
        """The last line with an address."""
        return self.line_of(self.total - 1)


@dataclass(frozen=True)
class _Operand:
    """How one read operand is laid out in SCALE-Sim's prefetch order and streamed in demand.

    The prefetch matrix stacks ``blocks`` blocks of ``height`` rows by ``width`` columns (the
    last block uses ``used_last`` columns, the rest padding). ``diagonal``: it is fetched by
    anti-diagonals (row descending within one), and demand line ``l`` of a fold on block ``b``
    reads the block's part of diagonal ``b * height + l - prefix``. Otherwise it is fetched row by
    row and a fold reads rows ``row_base + rows - 1 - l`` of block ``b`` (flipped). ``pattern``
    says how folds revisit blocks: ``cyclic`` (block = fr, all row folds again for each column
    fold), ``repeat`` (block = fc, re-read by each row fold back to back) or ``unique``."""

    name: str
    counts: _LineCounts
    diagonal: bool
    block_of_fold: np.ndarray
    height: int
    width: int
    blocks: int
    used_last: int
    prefix: int
    pattern: str
    row_base_of_fold: np.ndarray | None = None


class _Folds:
    """SCALE-Sim's fold schedule for ``m x n x k`` (C = A B, A m x k) on ``setup``."""

    def __init__(self, setup: ArraySetup, m: int, n: int, k: int):
        r, c = setup.rows, setup.cols
        self.r, self.c = r, c
        df = setup.dataflow
        # SCALE-Sim's spatial rows / columns and temporal extent per dataflow.
        if df == "os":
            sr, sc, t = m, n, k
        elif df == "ws":
            sr, sc, t = k, n, m
        else:
            sr, sc, t = k, m, n
        self.sr, self.sc, self.t = sr, sc, t
        self.rf = -(-sr // r)
        self.cf = -(-sc // c)
        self.ru_last = sr - (self.rf - 1) * r
        self.cu_last = sc - (self.cf - 1) * c
        self.folds = self.rf * self.cf
        # Lines per fold: the ofmap demand matrix's height (all three have the same).
        self.lines = t + r + c - 2 if df == "os" else 2 * r + c + t - 2
        self.total_lines = self.folds * self.lines
        folds = np.arange(self.folds, dtype=np.int64)
        self.fc, self.fr = np.divmod(folds, self.rf)
        # Fold kind: bit 0 = last row fold, bit 1 = last column fold.
        self.kind = ((self.fr == self.rf - 1).astype(np.int64)
                     + 2 * (self.fc == self.cf - 1).astype(np.int64))
        self.used = [(self.ru_last if kind & 1 else r, self.cu_last if kind & 2 else c)
                     for kind in range(4)]
        self.df = df
        self.m, self.n, self.k = m, n, k

    def _counts(self, table) -> _LineCounts:
        per_kind = [table(ru, cu) for ru, cu in self.used]
        return _LineCounts(self.kind, per_kind, self.lines)

    def ofmap(self) -> _LineCounts:
        """Ofmap writes per demand line."""
        r, t, length = self.r, self.t, self.lines
        if self.df == "os":
            # Outputs leave bottom row first after the T-1 line prefix, skewed by column.
            return self._counts(lambda ru, cu: _band(length, cu, t - 1 + r - ru, t + r - 2))
        return self._counts(lambda ru, cu: _band(length, cu, 2 * r - 1, 2 * r - 2 + t))

    def ifmap(self) -> _Operand:
        """The ifmap (A) operand."""
        r, t, length = self.r, self.t, self.lines
        if self.df == "os":
            counts = self._counts(lambda ru, cu: _band(length, ru, 0, t - 1))
            return _Operand("ifmap", counts, True, self.fr, t, r, self.rf, self.ru_last, 0,
                            "cyclic")
        if self.df == "ws":
            counts = self._counts(lambda ru, cu: _band(length, ru, r, r + t - 1))
            return _Operand("ifmap", counts, True, self.fr, t, r, self.rf, self.ru_last, r,
                            "cyclic")
        counts = self._counts(lambda ru, cu: _flipped_rows(length, r, ru, cu))
        return _Operand("ifmap", counts, False, self.fc, self.sr, self.c, self.cf,
                        self.cu_last, 0, "unique", self.fr * r)

    def filter(self) -> _Operand:
        """The filter (B) operand."""
        r, t, length = self.r, self.t, self.lines
        if self.df == "os":
            counts = self._counts(lambda ru, cu: _band(length, cu, 0, t - 1))
            return _Operand("filter", counts, True, self.fc, t, self.c, self.cf, self.cu_last,
                            0, "repeat")
        if self.df == "ws":
            counts = self._counts(lambda ru, cu: _flipped_rows(length, r, ru, cu))
            return _Operand("filter", counts, False, self.fc, self.sr, self.c, self.cf,
                            self.cu_last, 0, "unique", self.fr * r)
        counts = self._counts(lambda ru, cu: _band(length, ru, r, r + t - 1))
        return _Operand("filter", counts, True, self.fr, t, r, self.rf, self.ru_last, r,
                        "cyclic")

    def sram_counts(self) -> tuple[int, int, int]:
        """SCALE-Sim's SRAM ifmap reads, filter reads and ofmap writes."""
        m, n, k = self.m, self.n, self.k
        if self.df == "os":
            # SCALE-Sim adds the padded fold's rows + cols to the ofmap count of every fold.
            return self.cf * m * k, self.rf * k * n, m * n + self.folds * (self.r + self.c)
        if self.df == "ws":
            return self.cf * m * k, k * n, self.rf * m * n
        return k * m, self.cf * k * n, self.rf * m * n

    def efficiencies(self) -> tuple[float, float]:
        """Mean mapping efficiency and compute utilisation over folds, summed in fold order as
        SCALE-Sim's ``sum(list) / len`` does (left to right, so the floats agree)."""
        pes = self.r * self.c
        if self.df == "os":
            cycles = self.t + self.r + self.c - 2
        else:
            cycles = 2 * self.r + 2 * self.c + self.t - 3
        mapping = [ru * cu / pes for ru, cu in self.used]
        util = [ru * cu * self.t / (pes * cycles) for ru, cu in self.used]
        map_sum = util_sum = 0.0
        # Folds run fc outer, fr inner; only the last of each is a different kind.
        for fc in range(self.cf):
            for fr in range(self.rf):
                kind = (fr == self.rf - 1) + 2 * (fc == self.cf - 1)
                map_sum += mapping[kind]
                util_sum += util[kind]
        return map_sum / self.folds, util_sum / self.folds


# ------------------------------------------------------------------------------------------
# Ofmap write buffer


class _WriteBuffer:
    """SCALE-Sim's ``write_buffer`` (ofmap SRAM draining to DRAM), simulated by events."""

    def __init__(self, words: int, bandwidth: int):
        self.words = words
        self.bw = bandwidth
        self.active = math.ceil(words * 0.5)
        self.drain_words = words - self.active
        self.lines_per_drain = math.ceil(self.drain_words / bandwidth)
        self.free = words
        self.drain_end = 0
        self.pending = 0              # words stored since the last flush of a partial line
        self.rows: deque[list[int]] = deque()   # [full DRAM lines, words in a partial line]
        self.accesses = 0
        self.first_start: int | None = None
        self.last_end: int | None = None

    def store(self, words: int) -> None:
        """Store ``words`` words with no drain or stall among them."""
        self.free -= words
        self.pending += words

    def _flush(self) -> None:
        # SCALE-Sim packs stored words into DRAM lines of ``bw``; before a drain the partial
        # line is closed (padded), so lines are full except those closed by a drain.
        if self.pending:
            self.rows.append([self.pending // self.bw, self.pending % self.bw])
            self.pending = 0

    def drain(self, cycle: int) -> int:
        """Flush and drain the next lines from ``cycle`` on, one per cycle; the last cycle."""
        self._flush()
        taken = 0
        last_words = self.bw
        while taken < self.lines_per_drain and self.rows:
            head = self.rows[0]
            if head[0]:
                step = min(head[0], self.lines_per_drain - taken)
                head[0] -= step
                taken += step
                last_words = self.bw
            else:
                taken += 1
                last_words = head[1]
                head[1] = 0
            if not head[0] and not head[1]:
                self.rows.popleft()
        if not taken:
            raise RuntimeError("ofmap drain with nothing to drain (SCALE-Sim would fail here)")
        # SCALE-Sim discounts the padding of the drain's last line only.
        words = taken * self.bw - (self.bw - last_words)
        self.accesses += words
        self.free += words
        end = cycle + taken - 1
        # The DRAM trace spans the earliest start to the latest end: the end-of-layer drains
        # start at the last line's cycle even while a drain is still running.
        if self.first_start is None:
            self.first_start = cycle
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        return end

    def line(self, cycle: int, words: int) -> int:
        """Store one demand line's ``words`` at ``cycle``; the stall it causes."""
        current = cycle
        done = 0
        while done < words:
            if current < self.drain_end:
                # A drain is running: a store that leaves no free space waits for its end.
                need = max(self.free, 1)
                if words - done < need:
                    self.store(words - done)
                    break
                self.store(need)
                done += need
                current = self.drain_end
            else:
                # Idle: a store that leaves less than the active half free starts a drain.
                need = max(self.free - self.active + 1, 1)
                if words - done < need:
                    self.store(words - done)
                    break
                self.store(need)
                done += need
                self.drain_end = self.drain(current)
        return current - cycle

    def empty(self, cycle: int) -> None:
        """Drain everything left, back to back from ``cycle`` (SCALE-Sim's end of layer)."""
        self._flush()
        while self.rows:
            self.drain_end = self.drain(cycle)
            cycle = self.drain_end + 1


# ------------------------------------------------------------------------------------------
# Read buffers


def _tri(d: np.ndarray, r0, r1, c0: int, c1: int) -> np.ndarray:
    """``#{(r, c): r0 <= r < r1, c0 <= c < c1, r + c < d}``, elementwise over ``d`` and ``r0``."""
    h = np.maximum(np.asarray(r1) - np.asarray(r0), 0)

    def g(x):
        # sum over y = 1..x of min(y, h)
        x = np.maximum(x, 0)
        inner = np.minimum(x, h)
        return inner * (inner + 1) // 2 + (x - inner) * h

    if c1 <= c0:
        return np.zeros_like(d)
    return g(d - r0 - c0) - g(d - r0 - c1)


def _diag_valid_before(op: _Operand, d: np.ndarray, r0) -> np.ndarray:
    """Valid prefetch-matrix entries with row >= ``r0`` on diagonals ``< d``."""
    rows = op.blocks * op.height
    count = _tri(d, r0, rows, 0, op.width)
    if op.used_last < op.width:
        pad_r0 = np.maximum(r0, (op.blocks - 1) * op.height)
        count = count - _tri(d, pad_r0, rows, op.used_last, op.width)
    return count


def _line_ranks(op: _Operand, folds: _Folds, first: int, last: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For folds ``first..last-1``: the lines with reads of ``op`` and the prefetch-order rank
    of their first and last address (a line's addresses are consecutive in that order)."""
    length = folds.lines
    fold_ids = np.arange(first, last, dtype=np.int64)
    kinds = folds.kind[first:last]
    per_line = np.stack(op.counts.per_kind)[kinds]          # folds x lines
    pos = np.arange(length, dtype=np.int64)
    block = op.block_of_fold[first:last][:, None]
    if op.diagonal:
        d = block * op.height + pos[None, :] - op.prefix
        below = (block + 1) * op.height                      # rows of later blocks come first
        rank = (_diag_valid_before(op, d, 0) + _diag_valid_before(op, d + 1, below)
                - _diag_valid_before(op, d, below))
    else:
        row = block * op.height + op.row_base_of_fold[first:last][:, None] + folds.r - 1 - pos
        pad_rows = np.maximum(row - (op.blocks - 1) * op.height, 0)
        rank = row * op.width - pad_rows * (op.width - op.used_last)
    has = per_line > 0
    lines = (fold_ids[:, None] * length + pos[None, :])[has]
    lo = rank[has]
    return lines, lo, lo + per_line[has] - 1


class _UserReadBuffer:
    """SCALE-Sim's USER-mode ``read_buffer``: which demand lines trigger prefetches, and the
    stall they cost."""

    def __init__(self, op: _Operand, folds: _Folds, words: int, bandwidth: int):
        self.op = op
        self.folds = folds
        self.bw = bandwidth
        active = math.ceil(words * 0.5)
        prefetch = words - active
        self.set_words = math.ceil(words / 100)
        fetch_words = op.blocks * op.height * op.width           # padding included
        valid = fetch_words - op.height * (op.width - op.used_last)
        # A set closes every ``set_words`` addresses; the last (maybe empty) set still counts.
        self.sets = valid // self.set_words + 1
        self.window = min(self.sets, math.ceil(active / self.set_words))
        self.step = min(self.sets - self.window, math.ceil(prefetch / self.set_words))
        fetch_lines = math.ceil(fetch_words / bandwidth)
        self.initial_lines = min(math.ceil(active / bandwidth), fetch_lines)
        self.request_lines = math.ceil(prefetch / bandwidth)
        self.prefetches = 0
        self.events: dict[int, tuple[int, int]] = {}

    def _advance(self, k: int, target: int) -> int:
        """Prefetches done once set ``target`` is resident, from ``k`` done."""
        start = (k * self.step) % self.sets
        ahead = (target - start) % self.sets
        if ahead < self.window:
            return k
        # Slide by ``step`` sets per prefetch (wrapping round) until the window covers it.
        return k + -(-(ahead - self.window + 1) // self.step)

    def run(self) -> None:
        """Find every demand line that triggers prefetches (the window position depends on the
        address order only, not on time)."""
        if self.step == 0:
            return      # the whole operand is resident: never a miss
        folds = self.folds
        per_batch = max(1, _SCAN_CHUNK // folds.lines)
        k = 0
        for first in range(0, folds.folds, per_batch):
            lines, lo, hi = _line_ranks(self.op, folds, first,
                                        min(folds.folds, first + per_batch))
            lo //= self.set_words
            hi //= self.set_words
            k = self._scan(lines, lo, hi, k)
        self.prefetches = k

    def _scan(self, lines: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int) -> int:
        n = self.sets
        i = 0
        total = len(lines)
        chunk = 256
        wide = self.sets - self.window - self.step
        while i < total:
            end = min(total, i + chunk)
            start = (k * self.step) % n
            dlo = (lo[i:end] - start) % n
            dhi = (hi[i:end] - start) % n
            # A line is served from the window if both its ends are in it and the sets
            # between them too (no wrap round the operand between its ends).
            miss = (dlo >= self.window) | (dhi >= self.window) \
                | (dhi - dlo != hi[i:end] - lo[i:end])
            hits = np.flatnonzero(miss)
            if not len(hits):
                i = end
                chunk = min(chunk * 2, 1 << 16)
                continue
            j = i + int(hits[0])
            before = k
            if hi[j] - lo[j] >= wide:
                # A line spanning most of the operand: walk its sets one by one (rare).
                for target in range(int(lo[j]), int(hi[j]) + 1):
                    k = self._advance(k, target % n)
            else:
                k = self._advance(self._advance(k, int(lo[j])), int(hi[j]))
            if k != before:
                line = int(lines[j])
                prior = self.events.get(line)
                self.events[line] = (prior[0] if prior else before, k)
            i = j + 1
            chunk = 256
        return k

    def arrival(self, k: int) -> int:
        """Cycle the ``k``-th prefetch (1-based) has arrived: back to back after the initial
        fill, which ends at cycle -1."""
        return -1 + k * (self.request_lines + 1)

    def stall(self, line: int, cycle: int) -> int:
        """SCALE-Sim's read stall of ``line`` served at ``cycle``."""
        event = self.events.get(line)
        if event is None:
            return 0
        time = cycle + 1                      # hit latency
        for k in range(event[0] + 1, event[1] + 1):
            ready = self.arrival(k)
            # SCALE-Sim adds (ready - time) once always and once more when positive.
            time = 2 * ready - time if ready > time else ready
        return time - cycle - 1

    def dram(self) -> tuple[int, int, int]:
        """DRAM reads, first and last cycle of the DRAM trace."""
        reads = (self.initial_lines + self.prefetches * self.request_lines) * self.bw
        stop = self.arrival(self.prefetches) if self.prefetches else -1
        return reads, -self.initial_lines, stop


class _CalcReadBuffer:
    """SCALE-Sim's CALC-mode ``ReadBufferEstimateBw``: DRAM reads (its misses) and the cycles
    its bandwidth estimate spans."""

    def __init__(self, op: _Operand, folds: _Folds, words: int):
        self.op = op
        self.folds = folds
        self.set_words = words // 100
        self.epoch = 50 * self.set_words        # misses between two forgetting points
        self.misses = self._fold_misses()
        self.reads = int(self.misses.sum())

    def _fold_misses(self) -> np.ndarray:
        """Misses of each fold's traversal of its block (always a prefix of it)."""
        folds, size, epoch = self.folds, self.op.counts.fold_size, self.epoch
        pattern = self.op.pattern
        if pattern == "unique":
            return size.copy()
        if pattern == "cyclic":
            # The same row-fold blocks in the same order for every column fold: they all stay
            # recorded if one pass of them is less than an epoch, else every read misses.
            one_pass = int(size[:folds.rf].sum())
            if one_pass < epoch:
                return np.where(folds.fc == 0, size, 0)
            return size.copy()
        # "repeat": each column-fold block re-read back to back by all row folds.
        misses = np.zeros_like(size)
        count = 0
        for fc in range(folds.cf):
            base = fc * folds.rf
            block = int(size[base])
            if block >= epoch:
                misses[base:base + folds.rf] = block
                count += block * folds.rf
                continue
            misses[base] = block
            # The second read misses what was forgotten at the epoch its first read crossed.
            second = max(0, (count + block) // epoch * epoch - count) if folds.rf > 1 else 0
            if folds.rf > 1:
                misses[base + 1] = second
            count += block + second
        return misses

    def dram(self, cycle_of_line) -> tuple[int, int]:
        """First and last cycle of the DRAM trace; ``cycle_of_line`` maps a line to its cycle."""
        boundaries = self.reads // self.epoch
        if not boundaries:
            # One prefetch of every set at the end, placed just before cycle 0.
            sets = -(-self.reads // self.set_words)
            cycles = math.ceil(sets * self.set_words / _CALC_READ_BANDWIDTH)
            return -cycles, -1
        first = cycle_of_line(self.op.counts.first_line())
        start = first - math.ceil(self.epoch / _CALC_READ_BANDWIDTH)
        miss = boundaries * self.epoch - 1
        cum = np.concatenate(([0], np.cumsum(self.misses)))
        fold = int(np.searchsorted(cum, miss, side="right")) - 1
        line = self.op.counts.line_in_fold(fold, miss - int(cum[fold]))
        return start, cycle_of_line(line) + 1


# ------------------------------------------------------------------------------------------
# The run


#: The largest GEMM dimension simulated: the schedule keeps arrays per fold and per line of a
#: fold, so a larger one (a mistyped topology row) would exhaust memory instead of answering.
MAX_DIMENSION = 1 << 22


def _validate_gemm(m: object, n: object, k: object) -> tuple[int, int, int]:
    dims = _positive_int("m", m), _positive_int("n", n), _positive_int("k", k)
    for name, value in zip("mnk", dims, strict=True):
        if value > MAX_DIMENSION:
            raise UsageError(f"{name} = {value:,} is too large to simulate (at most "
                             f"{MAX_DIMENSION:,})")
    return dims


def _kb_words(kb: float) -> int:
    return math.floor(1024 * kb)


def _schedule_events(wb: _WriteBuffer, ofmap: _LineCounts, read_lines: list[int],
                     read_stall, ofmap_stalls: dict[int, int]
                     ) -> tuple[int, int, list[int], list[int]]:
    """Run the demand lines through the write buffer, with read stalls at ``read_lines``.

    Returns the stall total, the cycle the last line's ofmap writes are served (SCALE-Sim's
    compute cycles) and the lines / running stall totals where the stall grew; fills
    ``ofmap_stalls`` with the lines the write buffer stalled."""
    total_lines = ofmap.lines * len(ofmap.kind)
    stall = 0
    stall_lines: list[int] = []
    stall_totals: list[int] = []
    last_out: int | None = None
    line = 0
    stored = 0

    def serve(at: int) -> int:
        # One line with a possible event: its ofmap stall and read stalls, the largest counts.
        nonlocal stall, last_out, stored
        cycle = at + stall
        words = ofmap.count(at)
        ofmap_stall = wb.line(cycle, words)
        stored += words
        if ofmap_stall:
            ofmap_stalls[at] = ofmap_stall
        worst = max(ofmap_stall, read_stall(at, cycle))
        if at == total_lines - 1:
            last_out = cycle + ofmap_stall
        if worst > 0:
            stall += worst
            stall_lines.append(at)
            stall_totals.append(stall)
        return at + 1

    for stop in [*read_lines, total_lines]:
        # Lines [line, stop) have no read stall: jump between ofmap events.
        while line < stop:
            if line + stall < wb.drain_end:
                # Before the running drain ends only a full buffer matters (a stall).
                until = min(stop, wb.drain_end - stall)
                need = max(wb.free, 1)
            else:
                # After it, the store that leaves less than the active half free drains.
                until = stop
                need = max(wb.free - wb.active + 1, 1)
            words = ofmap.before(until) - stored
            if words < need:
                wb.store(words)
                stored += words
                line = until
                continue
            event = ofmap.line_of(stored + need - 1)
            wb.store(ofmap.before(event) - stored)
            stored = ofmap.before(event)
            line = serve(event)
        if stop < total_lines:
            line = serve(stop)
    if last_out is None:
        last_out = total_lines - 1 + stall
    return stall, last_out, stall_lines, stall_totals


def simulate_gemm(setup: ArraySetup, m: int, n: int, k: int) -> FoldReport:
    """SCALE-Sim 3.0's report for the GEMM C (m x n) = A (m x k) B (k x n) on ``setup``.

    A is SCALE-Sim's ifmap operand, B its filter, C its ofmap (a GEMM topology row
    ``name, m, n, k,`` is this GEMM). Cycle and access counts equal SCALE-Sim's exactly."""
    if not isinstance(setup, ArraySetup):
        raise UsageError(f"setup must be an ArraySetup, got {type(setup).__name__}")
    m, n, k = _validate_gemm(m, n, k)
    folds = _Folds(setup, m, n, k)
    ifmap, filt, ofmap = folds.ifmap(), folds.filter(), folds.ofmap()
    ifmap_words = _kb_words(setup.ifmap_sram_kb)
    filter_words = _kb_words(setup.filter_sram_kb)
    ofmap_words = _kb_words(setup.ofmap_sram_kb)

    if setup.bandwidth == "USER":
        wb = _WriteBuffer(ofmap_words, max(1, math.floor(setup.user_bandwidth)))
        readers = [_UserReadBuffer(ifmap, folds, ifmap_words, setup.ifmap_read_bandwidth),
                   _UserReadBuffer(filt, folds, filter_words, setup.filter_read_bandwidth)]
        for reader in readers:
            reader.run()
        read_lines = sorted(set(readers[0].events) | set(readers[1].events))

        def read_stall(line: int, cycle: int) -> int:
            return max(readers[0].stall(line, cycle), readers[1].stall(line, cycle))
    else:
        wb = _WriteBuffer(ofmap_words, setup.cols)
        read_lines = []

        def read_stall(line: int, cycle: int) -> int:
            return 0

    ofmap_stalls: dict[int, int] = {}
    stall, compute_cycles, stall_lines, stall_totals = _schedule_events(
        wb, ofmap, read_lines, read_stall, ofmap_stalls)
    wb.empty(compute_cycles)

    def cycle_of_line(line: int) -> int:
        at = int(np.searchsorted(np.asarray(stall_lines), line, side="left"))
        return line + (stall_totals[at - 1] if at else 0)

    if setup.bandwidth == "USER":
        ifmap_dram = readers[0].dram()
        filter_dram = readers[1].dram()
    else:
        calc = [_CalcReadBuffer(ifmap, folds, ifmap_words),
                _CalcReadBuffer(filt, folds, filter_words)]
        ifmap_dram = (calc[0].reads, *calc[0].dram(cycle_of_line))
        filter_dram = (calc[1].reads, *calc[1].dram(cycle_of_line))

    # SRAM trace spans: the cycles the first and last line with addresses are served.
    def served(counts: _LineCounts, reader) -> tuple[int, int]:
        ends = []
        for line in (counts.first_line(), counts.last_line()):
            cycle = cycle_of_line(line)
            extra = ofmap_stalls.get(line, 0) if reader is None else 1 + reader(line, cycle)
            ends.append(cycle + extra)
        return ends[0], ends[1]

    if setup.bandwidth == "USER":
        ifmap_sram = served(ifmap.counts, readers[0].stall)
        filter_sram = served(filt.counts, readers[1].stall)
    else:
        ifmap_sram = served(ifmap.counts, lambda line, cycle: 0)
        filter_sram = served(filt.counts, lambda line, cycle: 0)
    ofmap_sram = served(ofmap, None)
    sram_ifmap, sram_filter, sram_ofmap = folds.sram_counts()
    mapping, util = folds.efficiencies()
    macs = m * n * k
    pes = setup.rows * setup.cols
    ofmap_start, ofmap_stop = wb.first_start, wb.last_end
    return FoldReport(
        total_cycles=int(ofmap_stop - min(ifmap_dram[1], filter_dram[1])),
        compute_cycles=compute_cycles,
        stall_cycles=stall,
        overall_util_pct=(macs * 100) / (compute_cycles * pes),
        mapping_eff_pct=mapping * 100,
        compute_util_pct=util * 100,
        sram_ifmap_reads=sram_ifmap,
        sram_filter_reads=sram_filter,
        sram_ofmap_writes=sram_ofmap,
        dram_ifmap_reads=ifmap_dram[0],
        dram_filter_reads=filter_dram[0],
        dram_ofmap_writes=wb.accesses,
        avg_ifmap_sram_bw=sram_ifmap / compute_cycles,
        avg_filter_sram_bw=sram_filter / compute_cycles,
        avg_ofmap_sram_bw=sram_ofmap / compute_cycles,
        avg_ifmap_dram_bw=ifmap_dram[0] / (ifmap_dram[2] - ifmap_dram[1] + 1),
        avg_filter_dram_bw=filter_dram[0] / (filter_dram[2] - filter_dram[1] + 1),
        avg_ofmap_dram_bw=wb.accesses / (ofmap_stop - ofmap_start + 1),
        sram_ifmap_start_cycle=ifmap_sram[0],
        sram_ifmap_stop_cycle=ifmap_sram[1],
        sram_filter_start_cycle=filter_sram[0],
        sram_filter_stop_cycle=filter_sram[1],
        sram_ofmap_start_cycle=ofmap_sram[0],
        sram_ofmap_stop_cycle=ofmap_sram[1],
        dram_ifmap_start_cycle=ifmap_dram[1],
        dram_ifmap_stop_cycle=ifmap_dram[2],
        dram_filter_start_cycle=filter_dram[1],
        dram_filter_stop_cycle=filter_dram[2],
        dram_ofmap_start_cycle=ofmap_start,
        dram_ofmap_stop_cycle=ofmap_stop,
        row_folds=folds.rf,
        col_folds=folds.cf,
    )

