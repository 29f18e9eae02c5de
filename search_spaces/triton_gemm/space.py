"""Design space of a Triton GEMM on NVIDIA GPUs: tile sizes, pipeline stages (buffer count),
warps, the program-id swizzle (GROUP_M) and split-K."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution

from dse.core.errors import UsageError
from dse.core.params import ConfigBatch
from dse.core.space import Calibratable, SearchSpace
from dse.core.tree import ProductTree
from dse.core.workload import GemmWorkload
from search_spaces.triton_gemm.rules import BLOCKS, DOMAINS, covering, parameters, rules
from search_spaces.triton_gemm.target import GpuTarget


class TritonGemmSpace(SearchSpace):
    """Block sizes, stages, warps, swizzle and split-K of a Triton GEMM on one GPU."""

    name = "triton_gemm"
    required = BLOCKS
    kernel_keys = BLOCKS
    tile_axes = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    # the GPU model's assumptions (targets/h100.toml, h200.toml: [model]); the launch cost too,
    # which a decode-like GEMM's few microseconds cannot hide; shares of a peak stay at most 1
    calibratable = (Calibratable("model", "mma_efficiency", upper=1.0),
                    Calibratable("model", "step_overhead_cycles"),
                    Calibratable("model", "l2_bytes_per_s"),
                    Calibratable("model", "hbm_efficiency", upper=1.0),
                    Calibratable("model", "launch_s"))

    def __init__(self, target: GpuTarget, workload: GemmWorkload,
                 extra_constraints: Sequence[str] = ()) -> None:
        self._accept(target, workload, extra_constraints)
        self.target, self.workload = target, workload
        self._params = parameters()
        self.constraints = rules(target, workload)

    def defaults(self) -> dict[str, Any]:
        return {"num_stages": 3, "num_warps": 4, "GROUP_M": 8, "SPLIT_K": 1}

    def describe(self, params: Mapping[str, Any]) -> str:
        """The block written M x K x N, as GEMM sizes are, e.g. ``128x64x256``."""
        if not all(k in params for k in BLOCKS):
            return super().describe(params)
        return "x".join(str(params[k]) for k in ("BLOCK_M", "BLOCK_K", "BLOCK_N"))

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """As for every space; GROUP_M, when not given, is 8 or the smallest group covering
        the grid's block rows when there are fewer (the swizzle rule refuses larger ones)."""
        params = super().resolve(given)
        if "GROUP_M" not in given:
            rows = -(-self.workload.M // params["BLOCK_M"])  # BLOCK_M >= 1: parsed
            params["GROUP_M"] = min(params["GROUP_M"], covering(rows))
        return params

    def tie_order(self, batch: ConfigBatch) -> np.ndarray:
        """Swizzles the model scores alike (when the tensor cores set the pace, every GROUP_M
        whose wave fits L2 is one to it) go to the GPU from the customary GROUP_M=8 outwards
        (4 and 16, then 2 and 32, ...), not from GROUP_M=1, the walk without reuse."""
        default = self.defaults()["GROUP_M"]
        return np.abs(np.log2(batch["GROUP_M"]) - np.log2(default))

    def chunks(self, fix: Mapping[str, Any] | None = None,
               free: Iterable[str] = ()) -> Iterator[tuple[ConfigBatch, int]]:
        """Every combination of the domains (5 x 5 x 5 x 6 x 5 x 6 x 5 = 112,500), fixed
        parameters held; one batch a SPLIT_K value."""
        fixed, free = self._fixed_and_free(fix, free, overlap_ok=True)
        axes = {n: [fixed[n]] if n in fixed else list(v) for n, v in DOMAINS.items()}
        for split in axes.pop("SPLIT_K"):
            combos = np.array(list(itertools.product(*axes.values())), dtype=np.int64)
            batch = {n: combos[:, i] for i, n in enumerate(axes)}
            batch["SPLIT_K"] = np.full(len(combos), split, dtype=np.int64)
            yield {n: batch[n] for n in self._params}, len(combos)

    def search_tree(self, fix: Mapping[str, Any] | None = None,
                    free: Iterable[str] = ()) -> ProductTree:
        """The space (as :meth:`chunks` walks it) in two levels of the model's structure:
        (BLOCK_M, BLOCK_N, SPLIT_K), bounded by its padded MACs at the tensor cores' sustained
        peak; then BLOCK_K, stages and warps, which fix the program's compute time (GROUP_M only
        moves HBM traffic), bounded by that time against the least HBM traffic (A, B and C
        once); GROUP_M below."""
        fixed, _ = self._fixed_and_free(fix, free, overlap_ok=True)
        values = {n: [fixed[n]] if n in fixed else list(v) for n, v in DOMAINS.items()}
        return ProductTree(values, [
            ("C block and split (BLOCK_M, BLOCK_N, SPLIT_K)", ("BLOCK_M", "BLOCK_N", "SPLIT_K"),
             self._block_bound),
            ("program (BLOCK_K, num_stages, num_warps)", ("BLOCK_K", "num_stages", "num_warps"),
             self._program_bound)])

    def _least_memory_s(self) -> float:
        w, model = self.workload, self.target.model
        least = (w.M * w.K + w.K * w.N) * w.dtype.in_bytes + w.M * w.N * w.dtype.out_bytes
        return least / (self.target.device.hbm_bytes_per_s * model.hbm_efficiency)

    def _tops(self, t_compute: np.ndarray) -> np.ndarray:
        latency = np.maximum(t_compute, self._least_memory_s()) + self.target.model.launch_s
        return 2.0 * self.workload.macs / latency / 1e12

    def _block_bound(self, keys: ConfigBatch) -> np.ndarray:
        w, target = self.workload, self.target
        bm, bn = keys["BLOCK_M"].astype(np.float64), keys["BLOCK_N"].astype(np.float64)
        # every C tile's programs do the whole K between them, at no more than the peak
        padded_macs = np.ceil(w.M / bm) * bm * np.ceil(w.N / bn) * bn * w.K
        peak = target.peak_flops(w.dtype.input) * target.model.mma_efficiency
        return self._tops(2 * padded_macs / peak)

    def _program_bound(self, keys: ConfigBatch) -> np.ndarray:
        from dse.core.registry import family

        model = family(self.name).model
        assert model is not None  # the family registers its analytical model
        probe = {**keys, "GROUP_M": np.full(len(keys["BLOCK_M"]), DOMAINS["GROUP_M"][0])}
        return self._tops(model(probe, self.target, self.workload)["t_comp_s"])

    def n_chunks(self, free: Iterable[str] = ()) -> int:
        return len(DOMAINS["SPLIT_K"])

    def optuna_encoding(self, fix: Mapping[str, Any], free: Sequence[str],
                        ranges: Mapping[str, tuple[int, int]]) -> TritonEncoding:
        return TritonEncoding(self, self.parse(fix), ranges)


class TritonEncoding:
    """Each parameter a category of its domain (inside the study's ranges)."""

    def __init__(self, space: TritonGemmSpace, fix: Mapping[str, Any],
                 ranges: Mapping[str, tuple[int, int]]) -> None:
        self._space, self._fix = space, dict(fix)
        self._dists: dict[str, BaseDistribution] = {}
        for name, values in DOMAINS.items():
            if name in fix:
                continue
            lo, hi = ranges.get(name, (values[0], values[-1]))
            kept = tuple(v for v in values if lo <= v <= hi)
            if not kept:
                raise UsageError(f"range of {name} [{lo}, {hi}] holds none of {values}")
            self._dists[name] = CategoricalDistribution(kept)

    def distributions(self) -> dict[str, BaseDistribution]:
        return dict(self._dists)

    def decode(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        config = {**self._space.defaults(), **self._fix, **sampled}
        return {name: int(config[name]) for name in self._space.params()}
