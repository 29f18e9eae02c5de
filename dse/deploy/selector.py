"""Picking a kernel from a dispatch table at run time: needs nothing but Python.

A table (``dse cover --out``, format ``dse-dispatch/1``) holds its kernels (each a config's
parameters) and rules: a weight shape (K, N) and a range of M (the tokens in flight, which a
model's GEMMs vary at run time) name a kernel; a shape no rule covers runs the fallback.
:func:`select` and :func:`kernel_index` are all a runtime needs; :func:`python_module` writes
them, with the table, as a file of its own, which the Triton runner's job module runs to choose
its kernel's config.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

FORMAT = "dse-dispatch/1"


def kernel_index(table: dict, m: int, k: int, n: int) -> int:
    """The index in ``table["kernels"]`` of the kernel for an M x K x N GEMM: the rule for its
    weight shape (K, N) whose M range holds ``m``, else the table's fallback."""
    for rule in table["rules"]:
        if rule["k"] == k and rule["n"] == n and rule["m_min"] <= m \
                and (rule["m_max"] is None or m <= rule["m_max"]):
            return rule["kernel"]
    return table["fallback"]


def select(table: dict, m: int, k: int, n: int) -> dict:
    """The parameters of the kernel ``table`` gives an M x K x N GEMM."""
    return table["kernels"][kernel_index(table, m, k, n)]["params"]


def python_module(table: dict[str, Any]) -> str:
    """A Python file holding ``table`` and :func:`select`, with ``config(M, K, N)`` for it; it
    imports nothing but ``json``."""
    source = inspect.getsource(kernel_index) + "\n\n" + inspect.getsource(select)
    text = json.dumps(table, indent=1)
    literal = f"r'''{text}'''" if "'''" not in text and "\\" not in text else repr(text)
    return (f'"""Dispatch table of study {table.get("study", "")!r} on '
            f'{table.get("target", "")} ({FORMAT}), written by dse.\n\n'
            "``config(M, K, N)`` is the kernel's parameters for an M x K x N GEMM; e.g. as a\n"
            "Triton kernel's config: ``triton.heuristics({name: lambda args: config(args['M'], "
            "args['K'], args['N'])[name] for name in ...})``.\n\"\"\"\n\n"
            "import json\n\n"
            f"TABLE = json.loads({literal})\n\n\n"
            f"{source}\n\n"
            "def config(m: int, k: int, n: int) -> dict:\n"
            '    """This table\'s kernel parameters for an M x K x N GEMM."""\n'
            "    return select(TABLE, m, k, n)\n")
