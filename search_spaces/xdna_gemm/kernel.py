"""Single-core L1 kernel model: cycles of one m_ct x k_ct x n_ct kernel call.

The kernel is output-stationary: each call loads the partial C tile, accumulates k_ct/s
micro-tile MACs into it through (expand_r x expand_t) register blocks, and stores it back.
Cycles are split by where they go:

* MACs at the datapath peak, derated by a steady-state issue efficiency (``mac_efficiency``;
  1 on XDNA2, whose 2x2 block's operand loads exactly fill its two load ports, so Table 1's
  losses there are the C tile's; see docs/models.md);
* converting inputs to bfp16 (XDNA2 bf16): each A sub-tile is converted once per register-block
  column and each B sub-tile once per register-block row, so ``mkn/(t*et) + mkn/(r*er)`` elements;
* loading the C tile's partial sums into the accumulators, converting and storing them: per
  element plus per byte of the output type (this is what makes a small k_ct compute less);
* a fixed cost per call.

Input loads are hidden behind the MACs on both architectures (two load ports feed the register
blocks faster than the MAC unit consumes them), so they carry no term of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from search_spaces.xdna_gemm.target import InputSpec, KernelCost


@dataclass(frozen=True)
class KernelCycles:
    """Per-call cycle terms (arrays); ``total`` is their sum."""

    mac: np.ndarray
    convert: np.ndarray
    output: np.ndarray
    call: float

    @property
    def total(self) -> np.ndarray:
        return self.mac + self.convert + self.output + self.call


def kernel_cycles(
    m: np.ndarray, k: np.ndarray, n: np.ndarray, spec: InputSpec, cost: KernelCost, out_bytes: int
) -> KernelCycles:
    """Cycles of one kernel call for each (m, k, n)."""
    macs = np.asarray(m, dtype=np.float64) * k * n
    mac = macs / (spec.peak_macs_per_cycle * spec.mac_efficiency)
    if spec.convert_to_bfp16:
        converted = macs / (spec.t * spec.expand_t) + macs / (spec.r * spec.expand_r)
        convert = converted / cost.convert_elements_per_cycle
    else:
        convert = np.zeros_like(macs)
    out_elems = np.asarray(m, dtype=np.float64) * n
    output = out_elems * (cost.out_cycles_per_element + cost.out_cycles_per_byte * out_bytes)
    return KernelCycles(mac=mac, convert=convert, output=output, call=cost.call_cycles)


def macs_per_cycle(
    m: np.ndarray, k: np.ndarray, n: np.ndarray, spec: InputSpec, cost: KernelCost, out_bytes: int
) -> np.ndarray:
    """Sustained MACs per cycle of the kernel (the paper's Table 1 metric)."""
    macs = np.asarray(m, dtype=np.float64) * k * n
    return macs / kernel_cycles(m, k, n, spec, cost, out_bytes).total


def zero_cycles(m: np.ndarray, n: np.ndarray, cost: KernelCost, out_bytes: int) -> np.ndarray:
    """Cycles of the vectorised kernel that zeroes a C tile before each new reduction."""
    return np.asarray(m, dtype=np.float64) * n * out_bytes / cost.zero_bytes_per_cycle
