"""The AMX space's shapes, as its rules and its model both read them: the batch codes of its
choices, the K of one tile multiply, what a micro-kernel grid and a kept block cover."""

from __future__ import annotations

import numpy as np

from dse.core.params import ConfigBatch

CHOICE_CODES = {  # the batch codes of the choices rules and model read (index of each choice)
    "pack_a": ("yes", "no"), "pack_b": ("gemm", "block", "none", "stream"),
    "block_order": ("b_block", "a_block"), "micro_order": ("a_strip", "b_strip"),
    "load_hint": ("t0", "t1"),
    "prefetch_c": ("yes", "no"), "split": ("m", "n", "mn"), "engine": ("amx", "avx512"),
}


def k_tile(elem_bytes: int) -> int:
    """K elements per tile multiply: a tile row is 64 bytes."""
    return 64 // elem_bytes


def is_choice(batch: ConfigBatch, name: str, choice: str) -> np.ndarray:
    """Whether each config of ``batch`` has ``choice`` for the choice parameter ``name``."""
    return batch[name] == CHOICE_CODES[name].index(choice)


def grid_rows_of(batch: ConfigBatch) -> np.ndarray:
    """Rows of A a micro-kernel grid covers: 16 a tile row on AMX, one a row on AVX-512."""
    return np.where(is_choice(batch, "engine", "avx512"), 1, 16) * batch["grid_rows"]


def grid_cols_of(batch: ConfigBatch) -> np.ndarray:
    """Columns of B a micro-kernel grid covers: 16 a strip, or one with B in place."""
    return np.where(is_choice(batch, "pack_b", "none"), 1, 16) * batch["grid_cols"]


def kept_block_bytes(batch: ConfigBatch, elem: int) -> np.ndarray:
    """Bytes of the block the block order keeps while the other passes: B's kc x nc
    (``b_block``) or A's mc x kc (``a_block``)."""
    return np.where(is_choice(batch, "block_order", "b_block"), batch["nc"], batch["mc"]) \
        * batch["kc"] * elem
