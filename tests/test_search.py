"""Enumeration loses no feasible config, and exhaustive search returns the true best."""

from __future__ import annotations

import itertools

import numpy as np

from dse.core.registry import build_context, target_path
from dse.study.strategies.search import exhaustive


def _small_target(tmp_path):
    # An 8 KiB L1 / 32 KiB L2 chip keeps the full parameter box small enough to brute-force.
    text = target_path("xdna").read_text()
    text = text.replace("l1_bytes = 65536", "l1_bytes = 8192").replace(
        "l2_bytes = 524288", "l2_bytes = 32768")
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    return str(path)


def test_enumeration_finds_every_feasible_config(tmp_path):
    ctx = build_context(_small_target(tmp_path), "int8-int16", "256x512x256")
    batch, n_total = ctx.space.enumerate()
    feasible = ctx.space.check(batch).ok
    found = {tuple(int(batch[p][i]) for p in ("m_ct", "k_ct", "n_ct", "k_mt"))
             for i in np.flatnonzero(feasible)}
    spec = ctx.target.input_spec("int8")
    # m_ct, n_ct <= 144 and k_ct <= 440 are implied by the 7 KiB left in L1
    box = itertools.product(range(spec.r, 160, spec.r), range(spec.s, 520, spec.s),
                            range(spec.t, 160, spec.t))
    defaults = ctx.space.defaults()
    configs = [dict(defaults, m_ct=m, k_ct=k, n_ct=n, k_mt=j * k)
               for m, k, n in box for j in range(1, 512 // k + 2)]
    full = ctx.space.encode(configs)
    ok = ctx.space.check(full).ok
    # the k_mt domain stops at the first multiple of k_ct covering K = 512
    brute = {(c["m_ct"], c["k_ct"], c["n_ct"], c["k_mt"])
             for c, good in zip(configs, ok, strict=True) if good and c["k_mt"] < 512 + c["k_ct"]}
    assert brute and brute == found
    assert n_total >= len(batch["m_ct"])


def test_exhaustive_top_is_the_best_of_everything(analytical):
    ctx = build_context("xdna", "int8-int8", "1024x2048x1024")
    outcome = exhaustive(analytical, ctx, top=3, prune=False)
    batch, _ = ctx.space.enumerate()
    ok = ctx.space.check(batch).ok
    tops = analytical.score({k: v[ok] for k, v in batch.items()}, ctx)["tops"]
    assert outcome.top[0].metrics["tops"] == tops.max()
    assert exhaustive(analytical, ctx, top=3).top[0].metrics["tops"] == tops.max()
    assert outcome.n_feasible == int(ok.sum()) and outcome.n_evaluated == len(ok)
    assert sum(outcome.rejected_by.values()) == outcome.n_evaluated - outcome.n_feasible


def test_free_parameters_multiply_the_space():
    ctx = build_context("xdna", "int8-int8", "1024x1024x1024")
    base, _ = ctx.space.enumerate(fix={"m_ct": 64, "n_ct": 64})
    more, _ = ctx.space.enumerate(fix={"m_ct": 64, "n_ct": 64}, free=["bd_scheme", "b_layout"])
    assert len(more["m_ct"]) > 3 * len(base["m_ct"])
    assert set(more["bd_scheme"].tolist()) == {0, 1}


def test_evaluate_matches_vectorised_score(analytical):
    ctx = build_context("xdna2", "bf16-bf16", "2048x2048x2048")
    batch, _ = ctx.space.enumerate(fix={"k_ct": 64})
    results = analytical.evaluate(batch, ctx)
    ok = [r for r in results if r.ok]
    assert ok and len(results) == len(batch["m_ct"])
    scored = analytical.score({k: v[ctx.space.check(batch).ok] for k, v in batch.items()}, ctx)
    assert [r.metrics["tops"] for r in ok] == scored["tops"].tolist()
    assert all(r.reason for r in results if not r.ok)
