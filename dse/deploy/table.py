"""Dispatch tables: the kernels a cover chose and the rules that pick one for any GEMM, as JSON
(``dse-dispatch/1``), a C header for NPU runtimes and a Python module (:mod:`.selector`).

The rules: a model's weight shapes (K, N) are fixed while M, the tokens in flight, varies. For
each (K, N) of the mix, its shapes sorted by M each name the kernel that serves them; a kernel's
range of M reaches halfway (geometrically) to the next shape's. A shape of another (K, N) runs
the fallback: of the chosen kernels, the one that would run the whole mix fastest alone.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from dse.core.errors import UsageError
from dse.deploy.cover import Cover
from dse.deploy.problem import CoverProblem
from dse.deploy.selector import FORMAT


def build_table(problem: CoverProblem, cover: Cover) -> dict[str, Any]:
    """The dispatch table of ``cover`` (its rules, fallback, and what each shape of the mix
    gets against its optimum)."""
    kernels = [problem.candidates[j] for j in cover.kernels]
    seconds = problem.seconds()[:, list(cover.kernels)]
    fallback = int(np.argmin(np.where(np.isfinite(seconds), seconds, 1e300).sum(axis=0)))
    shapes = []
    for i, workload in enumerate(problem.workloads):
        kernel = int(cover.assign[i])
        shapes.append({"shape": workload.shape, "M": workload.M, "K": workload.K,
                       "N": workload.N, "weight": float(problem.weights[i]), "kernel": kernel,
                       "tops": float(problem.tops[i, cover.kernels[kernel]]),
                       "optimum_tops": float(problem.optimum[i]),
                       "loss": float(cover.losses[i]), "bound": problem.bound[i]})
    first = problem.workloads[0]
    return {"format": FORMAT, "study": problem.study, "target": problem.target,
            "evaluator": problem.evaluator, "space": problem.space,
            "dtype": first.dtype.name, "b_layout": first.b_layout,
            "objective": cover.objective, "exact": cover.exact, "fraction": cover.fraction,
            "params": problem.params,
            "kernels": [{"id": n, "params": {p: kernel[p] for p in problem.params
                                             if p in kernel}} for n, kernel in
                        enumerate(kernels)],
            "rules": _rules(shapes), "fallback": fallback, "shapes": shapes}


def _rules(shapes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rules = []
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for shape in shapes:
        groups.setdefault((shape["K"], shape["N"]), []).append(shape)
    for (k, n), group in groups.items():
        group.sort(key=lambda s: s["M"])
        start = 1
        for here, after in zip(group, [*group[1:], None], strict=True):
            if after is not None and after["kernel"] == here["kernel"]:
                continue
            end = None if after is None else max(here["M"], math.isqrt(here["M"] * after["M"]))
            rules.append({"k": k, "n": n, "m_min": start, "m_max": end,
                          "kernel": here["kernel"]})
            if end is not None:
                start = end + 1
    return rules


def kernel_lines(table: dict[str, Any]) -> tuple[list[str], str]:
    """Each kernel's parameters that differ between the table's kernels (``name=value, ...``;
    a lone kernel's all), and those every kernel shares, once."""
    params = [k["params"] for k in table["kernels"]]
    shared = {p: v for p, v in params[0].items() if all(q.get(p) == v for q in params)} \
        if len(params) > 1 else {}
    lines = [", ".join(f"{p}={v}" for p, v in kernel.items() if p not in shared)
             for kernel in params]
    return lines, ", ".join(f"{p}={v}" for p, v in shared.items())


def write_table(table: dict[str, Any], out: str | Path) -> Path:
    """Write ``table`` as JSON to ``out`` and return its path."""
    path = Path(out)
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return path


def read_table(path: str | Path) -> dict[str, Any]:
    """A dispatch table file, checked enough that a selector can use it; a malformed one is a
    :class:`UsageError` naming what is wrong."""
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(table, dict) or table.get("format") != FORMAT:
        raise UsageError(f"{path}: not a dispatch table (format {FORMAT!r}, as dse cover "
                         "--out writes)")
    kernels, rules, fallback = table.get("kernels"), table.get("rules"), table.get("fallback")
    if not isinstance(kernels, list) or not kernels or not all(
            isinstance(k, dict) and isinstance(k.get("params"), dict) for k in kernels):
        raise UsageError(f"{path}: 'kernels' must be a non-empty list of {{params: ...}}")
    if not isinstance(fallback, int) or not 0 <= fallback < len(kernels):
        raise UsageError(f"{path}: 'fallback' must index 'kernels' (0 to {len(kernels) - 1})")
    keys = ("k", "n", "m_min", "m_max", "kernel")
    if not isinstance(rules, list) or not all(
            isinstance(r, dict) and set(r) == set(keys)
            and all(isinstance(r[x], int) for x in ("k", "n", "m_min", "kernel"))
            and (r["m_max"] is None or isinstance(r["m_max"], int))
            and 0 <= r["kernel"] < len(kernels) for r in rules):
        raise UsageError(f"{path}: 'rules' must be a list of {{{', '.join(keys)}}} with whole "
                         "numbers (m_max null: no limit) and kernels that exist")
    for key in ("target", "evaluator", "dtype"):
        if key not in table:
            raise UsageError(f"{path}: no {key!r}")
    return table


def c_header(table: dict[str, Any], name: str = "dse") -> str:
    """A C header with the table's kernels, rules and ``<name>_select(m, k, n)`` returning a
    kernel's index (C99; no allocation, no library)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", name):
        raise UsageError(f"--name {name!r}: a C identifier (letters, digits, _), up to 41 "
                         "characters")
    params = list(table["kernels"][0]["params"])
    fields = [(p, _c_type([k["params"].get(p) for k in table["kernels"]])) for p in params]
    guard = f"{name.upper()}_DISPATCH_H"
    lines = [f"/* Dispatch table of study {_comment(table.get('study', ''))} on "
             f"{_comment(table['target'])}, {_comment(table['dtype'])} ({FORMAT}), written by "
             "dse. */",
             f"#ifndef {guard}", f"#define {guard}", "",
             "typedef struct {",
             *(f"    {ctype} {_field(p)};" for p, ctype in fields),
             f"}} {name}_kernel;", "",
             f"static const {name}_kernel {name}_kernels[{len(table['kernels'])}] = {{",
             *(f"    {{{', '.join(_c_value(k['params'].get(p), ctype) for p, ctype in fields)}}},"
               for k in table["kernels"]),
             "};", "",
             "/* a weight shape (k, n) and a range of m; m_max -1: no limit */",
             "typedef struct { long k, n, m_min, m_max; int kernel; } "
             f"{name}_rule;", "",
             f"static const {name}_rule {name}_rules[{max(1, len(table['rules']))}] = {{",
             *(f"    {{{r['k']}, {r['n']}, {r['m_min']}, "
               f"{-1 if r['m_max'] is None else r['m_max']}, {r['kernel']}}},"
               for r in table["rules"]),
             *(["    {0, 0, 0, -1, 0},  /* no rule: the fallback serves every shape */"]
               if not table["rules"] else []),
             "};", "",
             f"#define {name.upper()}_FALLBACK {table['fallback']}", "",
             f"/* The index in {name}_kernels of the kernel for an m x k x n GEMM. */",
             f"static inline int {name}_select(long m, long k, long n) {{",
             f"    for (unsigned i = 0; i < sizeof {name}_rules / sizeof {name}_rules[0]; "
             "i++) {",
             f"        const {name}_rule *r = &{name}_rules[i];",
             "        if (r->k == k && r->n == n && r->m_min <= m && "
             "(r->m_max < 0 || m <= r->m_max))",
             "            return r->kernel;", "    }",
             f"    return {name.upper()}_FALLBACK;", "}", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _comment(text: Any) -> str:
    return str(text).replace("*/", "* /")


def _field(name: str) -> str:
    field = re.sub(r"\W", "_", name)
    return field if field[:1].isalpha() or field[:1] == "_" else f"p_{field}"


def _c_type(values: list[Any]) -> str:
    if all(isinstance(v, bool) or isinstance(v, int) for v in values):
        return "long"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return "double"
    return "const char *"


def _c_value(value: Any, ctype: str) -> str:
    if ctype == "const char *":
        return json.dumps("" if value is None else str(value))  # a C string literal
    if ctype == "double":
        return repr(float(value))
    return str(int(value))

