"""The GEMMs a transformer runs, with how often: a workload mix derived from a model.

A decoder-only transformer's layer multiplies its activations (M = the tokens in flight) by four
weight matrices: the fused query/key/value projection, the output projection, the fused
gate/up projection of its gated MLP and the down projection; the LM head multiplies the last
hidden state of each sequence by the vocabulary. A serving mix runs decode steps (M = the batch,
one token per sequence) and prefills (M = the prompt's tokens, one sequence); each token count
is run ``passes`` times. Attention's own products (QK^T, PV) depend on the context length and
are not weight GEMMs: they are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dse.core.errors import UsageError

PHASES = ("decode", "prefill")
MAX_TOKENS = 1 << 20  # a token count past a million is a typo, not a serving mix
MAX_PASSES = 10**9
MAX_COUNTS = 200  # token counts a phase (each gives five GEMMs)


@dataclass(frozen=True)
class ModelShape:
    """What fixes a transformer's weight GEMMs: hidden size, MLP size, attention heads and
    key/value heads (grouped-query attention), vocabulary, layers and the head size (default
    ``hidden // heads``)."""

    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    layers: int
    head_dim: int = 0

    def __post_init__(self) -> None:
        for key in ("hidden", "intermediate", "heads", "kv_heads", "vocab", "layers",
                    *(("head_dim",) if self.head_dim != 0 else ())):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 24:
                raise UsageError(f"model {self.name!r}: {key} must be a whole number from 1 to "
                                 f"{1 << 24:,}, got {value!r}")
        if self.heads % self.kv_heads:
            raise UsageError(f"model {self.name!r}: heads ({self.heads}) must be a multiple of "
                             f"kv_heads ({self.kv_heads})")
        if not self.head_dim:
            if self.hidden % self.heads:
                raise UsageError(f"model {self.name!r}: hidden ({self.hidden}) is not a "
                                 f"multiple of heads ({self.heads}); give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)

    def layer_gemms(self) -> list[tuple[str, int, int, int]]:
        """(role, K, N, calls per token count) of the weight GEMMs of one forward pass but the
        LM head: each layer's four, ``layers`` times."""
        qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
        return [("qkv", self.hidden, qkv, self.layers),
                ("o_proj", self.heads * self.head_dim, self.hidden, self.layers),
                ("gate_up", self.hidden, 2 * self.intermediate, self.layers),
                ("down", self.intermediate, self.hidden, self.layers)]


# Public configurations (their config.json on the Hugging Face hub): name -> model.
PRESETS: dict[str, ModelShape] = {m.name: m for m in (
    ModelShape("llama-3.1-8b", 4096, 14336, 32, 8, 128256, 32),
    ModelShape("llama-3.2-1b", 2048, 8192, 32, 8, 128256, 16, 64),
    ModelShape("llama-3.2-3b", 3072, 8192, 24, 8, 128256, 28, 128),
    ModelShape("llama-2-7b", 4096, 11008, 32, 32, 32000, 32),
    ModelShape("mistral-7b-v0.3", 4096, 14336, 32, 8, 32768, 32),
    ModelShape("qwen2.5-7b", 3584, 18944, 28, 4, 152064, 28, 128),
)}


@dataclass(frozen=True)
class MixShape:
    """One GEMM of a mix: M x K x N, called ``count`` times a pass of the whole mix, and the
    roles it plays (``qkv@decode:8``: the QKV projection of decode steps of batch 8)."""

    M: int
    K: int
    N: int
    count: int
    roles: tuple[str, ...]

    @property
    def shape(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "count": self.count, "roles": list(self.roles)}


def model_of(raw: Any) -> ModelShape:
    """A preset's name, or a mapping of :class:`ModelShape`'s fields (``name`` optional)."""
    if isinstance(raw, str):
        if raw not in PRESETS:
            raise UsageError(f"unknown model {raw!r}; presets: {', '.join(PRESETS)} (or give "
                             "hidden, intermediate, heads, kv_heads, vocab and layers)")
        return PRESETS[raw]
    if not isinstance(raw, Mapping):
        raise UsageError(f"a model is a preset's name or a mapping of its sizes, got "
                         f"{type(raw).__name__}")
    fields = ("name", "hidden", "intermediate", "heads", "kv_heads", "vocab", "layers",
              "head_dim")
    unknown = [key for key in raw if key not in fields]
    if unknown:
        raise UsageError(f"model: unknown key {str(unknown[0])[:60]!r}; keys: "
                         f"{', '.join(fields)}")
    missing = [k for k in fields[1:7] if k not in raw]
    if missing:
        raise UsageError(f"model: missing {', '.join(missing)}")
    name = raw.get("name", "model")
    if not isinstance(name, str) or not name.strip():
        raise UsageError("model: name must be a non-empty text")
    return ModelShape(name, *(raw[k] for k in fields[1:7]), raw.get("head_dim", 0) or 0)


def token_passes(raw: Any) -> dict[str, dict[int, int]]:
    """``{phase: {tokens: passes}}`` from ``{decode: [1, 8], prefill: {2048: 1}}``: a list gives
    each count one pass, a mapping its passes."""
    if not isinstance(raw, Mapping) or not raw:
        raise UsageError("tokens: give decode batch sizes and/or prefill lengths, e.g. "
                         "{decode: [1, 8, 32], prefill: [512, 2048]}")
    unknown = [phase for phase in raw if phase not in PHASES]
    if unknown:
        raise UsageError(f"tokens: unknown phase {str(unknown[0])[:60]!r}; phases: "
                         f"{', '.join(PHASES)}")
    out: dict[str, dict[int, int]] = {}
    for phase, counts in raw.items():
        items = counts.items() if isinstance(counts, Mapping) else \
            ((c, 1) for c in counts) if isinstance(counts, list) else None
        if items is None:
            raise UsageError(f"tokens.{phase}: a list of token counts or a mapping of token "
                             "count to passes")
        if len(counts) > MAX_COUNTS:
            raise UsageError(f"tokens.{phase}: {len(counts):,} token counts; at most "
                             f"{MAX_COUNTS} (a study holds a few hundred workloads)")
        parsed: dict[int, int] = {}
        for tokens, passes in items:
            tokens = _whole(tokens, f"tokens.{phase}: a token count", MAX_TOKENS)
            parsed[tokens] = _whole(passes, f"tokens.{phase}.{tokens}: passes", MAX_PASSES)
        if not parsed:
            raise UsageError(f"tokens.{phase}: empty")
        out[str(phase)] = parsed
    return out


def _whole(value: Any, what: str, most: int) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)  # YAML mapping keys may come as text
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise UsageError(f"{what} must be a whole number from 1 to {most:,}, got {value!r}")
    return value


def model_mix(model: ModelShape, passes: Mapping[str, Mapping[int, int]]) -> list[MixShape]:
    """The weight GEMMs of ``model`` run at each token count of ``passes``, identical shapes
    merged (their counts added), in the order first met."""
    merged: dict[tuple[int, int, int], list[Any]] = {}

    def add(role: str, m: int, k: int, n: int, count: int) -> None:
        entry = merged.setdefault((m, k, n), [0, []])
        entry[0] += count
        entry[1].append(role)

    for phase in PHASES:
        for tokens, times in passes.get(phase, {}).items():
            where = f"{phase}:{tokens}"
            for role, k, n, calls in model.layer_gemms():
                add(f"{role}@{where}", tokens, k, n, calls * times)
            # the LM head scores one token a sequence: each of a decode batch's, a prefill's
            # last
            add(f"lm_head@{where}", tokens if phase == "decode" else 1, model.hidden,
                model.vocab, times)
    return [MixShape(m, k, n, count, tuple(roles)) for (m, k, n), (count, roles)
            in merged.items()]


def mix_summary(model: ModelShape, shapes: Iterable[MixShape]) -> dict[str, Any]:
    """What a study stores of its mix: the model and each shape's count and roles."""
    return {"model": {k: getattr(model, k) for k in ("name", "hidden", "intermediate", "heads",
                                                     "kv_heads", "vocab", "layers",
                                                     "head_dim")},
            "shapes": [s.to_dict() for s in shapes]}
