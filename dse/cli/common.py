"""What the command groups share: the problem options, evaluator options, and the store a
command's ``--storage`` names. Light on imports: ``dse --help`` builds every parser."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dse.core.commands import name_values

if TYPE_CHECKING:
    from dse.storage.store import ResultStore


def add_problem_args(p: argparse.ArgumentParser) -> None:
    """``--target``, ``--dtype``, ``--shape``, ``--b-layout``, ``--evaluator``, ``--constraint``
    and ``--json``: one GEMM on one target."""
    p.add_argument("--target", required=True, help="target name (see `dse targets`) or .toml path")
    p.add_argument("--dtype", required=True, help="input-output types, e.g. int8-int8, bf16-bf16 "
                   "(one type: the same out, e.g. bf16)")
    p.add_argument("--shape", required=True, help="GEMM size MxKxN, e.g. 4096x4096x4096; a "
                   "batched GEMM (ascend-950pr) BxMxKxN, e.g. 8x2048x1024x2048; a mix on a "
                   "systolic array (tpu-*, edge-npu) MxKxN*COUNT,...")
    p.add_argument("--b-layout", default=None, help="B in DRAM: col (default) or row; for a "
                   "batched GEMM which operands are transposed: NN (default), NT, TN, TT; on "
                   "a systolic array dense (default) or 2:4")
    p.add_argument("--evaluator", default="analytical", help="evaluator name (default analytical)")
    p.add_argument("--constraint", action="append", default=[], metavar="NAME",
                   help="also enforce an optional rule (XDNA: dma_bound, no_padding) or a "
                   "budget (systolic arrays: 'pes <= N', 'sram_kb <= N', 'dram_mb_s <= N')")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def backend_options(items: Sequence[str] | None) -> dict[str, Any]:
    """``--option KEY=VALUE`` items as an evaluator's options; a value is read as JSON when it
    is (numbers, true/false), else kept as text (paths, names)."""
    options: dict[str, Any] = {}
    for key, value in name_values(items, "--option").items():
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--option KEY=VALUE`` (repeatable) to ``parser``."""
    parser.add_argument("--option", action="append", metavar="KEY=VALUE",
                        help="evaluator option, e.g. mlir_aie_dir=/opt/mlir-aie flow=jit")


def open_store_of(args: argparse.Namespace, mode: str | None = None,
                  default: str | None = None) -> ResultStore | None:
    """The store a command's ``--storage`` names (else ``default``, else ./dse.db), opened as
    ``mode`` (default: the command's ``store_mode``) says: ``read`` opens an existing one to
    read only, ``existing`` refuses a database that does not exist, ``create`` creates it; None
    for a command without one, or whose mode is ``deferred`` (it calls this itself, with the
    mode it needs, once its input is checked)."""
    mode = mode or getattr(args, "store_mode", None)
    if mode not in ("read", "existing", "create"):
        return None
    from dse.storage.store import open_store

    storage = args.storage if args.storage is not None else default
    return open_store(storage, existing=mode == "existing", read_only=mode == "read")


def storage_option(storage: str | None) -> str:
    """`` --storage STORAGE`` for a command shown to the user (nothing for the default)."""
    return f" --storage {shlex.quote(storage)}" if storage else ""
