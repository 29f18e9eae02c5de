"""Design space of the output-stationary whole-array GEMM on AMD Ryzen AI XDNA / XDNA2."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from dse.core import (
    Calibratable,
    ConfigBatch,
    GemmWorkload,
    IntParam,
    Rule,
    SearchSpace,
)
from search_spaces.xdna_gemm.constraints import (
    ARRAY_RULES,
    CONSTRAINTS,
    OPTIONAL_CONSTRAINTS,
    CheckContext,
)
from search_spaces.xdna_gemm.enumeration import enumerate_tiles, tile_domains
from search_spaces.xdna_gemm.params import TILE_PARAMS, build_params, default_params
from search_spaces.xdna_gemm.sampling import OptunaEncoding
from search_spaces.xdna_gemm.target import XdnaTarget
from search_spaces.xdna_gemm.tree import XdnaTree, allowed_codes, tree_box

# What the XDNA evaluators report of where a config's time went, beyond t_comp and t_mem.
TIME_PARTS = {"t_fill_s": "pipeline fill", "t_drain_s": "drain (exposed at the end)",
              "t_zero_s": "C zeroing", "t_bd_s": "BD reconfiguration",
              "t_bd_setup_s": "BD setup", "t_dispatch_s": "dispatch",
              "stall_inputs_s": "stall: waiting for A/B", "stall_c_drain_s": "stall: C drain",
              "stall_bds_s": "stall: waiting for BDs"}


class XdnaGemmSpace(SearchSpace):
    """Tile sizes, buffer depths, array use and mapping of a GEMM on one XDNA target.

    Args:
        target: the accelerator.
        workload: the GEMM.
        extra_constraints: names of optional rules to enforce too (``dma_bound``: eq. 4).
    """

    name = "xdna_gemm"
    required = TILE_PARAMS
    kernel_keys = TILE_PARAMS
    tile_axes = ("m_ct", "n_ct", "k_ct")
    # DRAM bandwidth and the fixed cost of a dispatch are what measurements pin down best; the
    # C tile's cost per byte sets how fast small-k_ct kernels compute, and the merging of a
    # row-major B's reads how much that layout loses (XDNA2 ships it at 0: unmeasured)
    calibratable = (Calibratable("dram", "peak_bytes_per_s"),
                    Calibratable("overheads", "dispatch_s"),
                    Calibratable("kernel", "out_cycles_per_byte"),
                    Calibratable("dram", "read_merge", upper=1.0))
    time_parts = TIME_PARTS
    optional_constraints = OPTIONAL_CONSTRAINTS
    def __init__(self, target: XdnaTarget, workload: GemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target: XdnaTarget = target
        self.workload: GemmWorkload = workload
        self._params = build_params(target)
        self.constraints: tuple[Rule, ...] = CONSTRAINTS + tuple(
            OPTIONAL_CONSTRAINTS[c] for c in extra_constraints)

    def defaults(self) -> dict[str, Any]:
        """Default values of every parameter except the tile sizes."""
        return default_params(self.target, self.workload)

    def _context(self, batch: ConfigBatch) -> CheckContext:
        return CheckContext(batch, self.target, self.workload)

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Configs to search, one batch per combination of the non-tile parameters, each with
        the size of the parameter box it was drawn from.

        Tile sizes vary unless fixed (listing them in ``free`` changes nothing); other parameters
        keep their default unless listed in ``free`` (then every value of their domain) or fixed.
        """
        fixed, free = self._fixed_and_free(fix, free)
        defaults = self.defaults()
        others = [p for p in self._params if p not in TILE_PARAMS]
        choices = [self._domain(p) if p in free else [fixed.get(p, defaults[p])] for p in others]
        fixed_tiles = {p: fixed[p] for p in TILE_PARAMS if p in fixed}
        for combo in itertools.product(*choices):
            other = {p: self._params[p].encode(v) for p, v in zip(others, combo, strict=True)}
            hi = tile_domains(self.target, self.workload, other)
            box = 1
            for p in TILE_PARAMS:
                box *= 1 if p in fixed else max(hi[p] // self._step(p), 1)
            if self._array_fits(other):
                yield enumerate_tiles(self.target, self.workload, other, fixed_tiles), box
            else:  # no tile size can make this array use feasible
                yield {p: np.zeros(0, dtype=np.int64) for p in self._params}, box

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        """How many batches :meth:`chunks` yields for these free parameters."""
        count = 1
        for name in set(free) - set(TILE_PARAMS):
            count *= len(self._domain(name)) if name in self._params else 1
        return count

    def search_tree(self, fix: Mapping[str, Any] | None = None,
                    free: Iterable[str] = ()) -> XdnaTree:
        """The space as :meth:`chunks` walks it, split for exact search with pruning (see
        :mod:`search_spaces.xdna_gemm.tree`), its bounds those of the family's analytical
        model."""
        from dse.core.registry import family

        fixed, free = self._fixed_and_free(fix, free)
        allowed = allowed_codes(self._params, self.defaults(), fixed, free, self._domain)
        steps = {p: self._step(p) for p in TILE_PARAMS}
        model = family(self.name).model
        assert model is not None  # the family registers its analytical model
        return XdnaTree(self.target, self.workload, self._params, allowed, model,
                        self.satisfies, tree_box(self.target, self.workload, allowed, steps))

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> OptunaEncoding:
        """Fixed Optuna distributions for this space with the given overrides."""
        return OptunaEncoding(self.target, self.workload, self._params, self.defaults(),
                              self.parse(fix), free, ranges)

    def _array_fits(self, other: Mapping[str, int]) -> bool:
        """Whether the array-use rules (independent of tile sizes) hold for these parameters."""
        spec = self.target.input_spec(self.workload.dtype.input)
        probe = {name: np.array([value]) for name, value in other.items()}
        probe.update({"m_ct": np.array([spec.r]), "k_ct": np.array([spec.s]),
                      "n_ct": np.array([spec.t]), "k_mt": np.array([spec.s])})
        return all(self.satisfies(rule, probe)[0] for rule in ARRAY_RULES)

    def _domain(self, name: str) -> list[Any]:
        param = self._params[name]
        if isinstance(param, IntParam):
            assert param.hi is not None  # only tile sizes are unbounded, and they always vary
            return list(range(param.lo, param.hi + 1))
        return list(param.choices)

    def _step(self, name: str) -> int:
        spec = self.target.input_spec(self.workload.dtype.input)
        return {"m_ct": spec.r, "k_ct": spec.s, "n_ct": spec.t, "k_mt": spec.s}[name]

    def what_if_knobs(self) -> dict[str, Callable[[float], XdnaTarget]]:
        """DRAM bandwidth, L1 size and the clock, each scaled by a factor."""
        t = self.target
        return {
            "dram bandwidth": lambda f: t.with_values(
                dram={"peak_bytes_per_s": t.dram.peak_bytes_per_s * f}),
            "L1 size": lambda f: t.with_values(memory={"l1_bytes": int(t.memory.l1_bytes * f)}),
            "clock": lambda f: t.with_values(array={"clock_hz": t.array.clock_hz * f})}

    def smallest_config(self, fix: Mapping[str, Any]) -> dict[str, Any]:
        """The smallest aligned tiles (k_mt = k_ct) with ``fix`` applied."""
        spec = self.target.input_spec(self.workload.dtype.input)
        probe = {"m_ct": spec.r * spec.expand_r, "k_ct": spec.s,
                 "n_ct": spec.t * spec.expand_t, **fix}
        probe.setdefault("k_mt", probe["k_ct"])
        return probe
