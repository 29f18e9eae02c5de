"""The AMX builder: a kernel's C source compiled once into a shared library, cached by the hash
of its source and compiler command, so a config compiles once on this machine however many
studies, processes or Ray workers ask for it (each writes under a temporary name and renames,
so builds running at once never see half a file)."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evaluators.hardware.amx_detect import cpu_flags, cpu_model

AMX_FLAGS = ("-mamx-tile", "-mamx-int8", "-mamx-bf16")
BASE_FLAGS = ("-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11")
# A library (``dse dispatch build``) is built for ISAs, not for the machine that builds it: it
# may run on another CPU. Its tuned kernels take x86-64-v4 with VNNI and BF16 (and AMX's), which
# its dispatcher checks at run time before it calls one; the dispatcher and the portable kernels
# take the baseline x86-64 (their AVX2 micro-kernels are chosen at run time too).
LIBRARY_KERNEL_FLAGS = ("-O2", "-march=x86-64-v4", "-mavx512vnni", "-mavx512bf16", *AMX_FLAGS,
                        "-mtune=native", "-fopenmp", "-fPIC", "-std=gnu11")
LIBRARY_PORTABLE_FLAGS = ("-O2", "-march=x86-64", "-mtune=generic", "-fopenmp", "-fPIC",
                          "-std=gnu11")
COMPILE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Build:
    """What building one source gave: the library's path, or the compiler's complaint."""

    library: Path | None
    error: str | None = None
    cached: bool = False  # the library was there already
    seconds: float = 0.0  # compile time (0 when cached)


def cache_dir() -> Path:
    """Where built kernels are kept: ``$DSE_AMX_CACHE``, else ``~/.cache/dse/amx``."""
    root = os.environ.get("DSE_AMX_CACHE") or Path.home() / ".cache" / "dse" / "amx"
    return Path(root)


def compiler() -> list[str]:
    """The system C compiler (``$CC``, else ``cc``)."""
    return shlex.split(os.environ.get("CC", "cc"))


def compile_command(emulate: bool) -> list[str]:
    """The compiler and its flags (AMX's, unless the tiles are emulated)."""
    return [*compiler(), *BASE_FLAGS, *(() if emulate else AMX_FLAGS)]


def build(source: str, emulate: bool = False) -> Build:
    """The library of ``source``, compiled now or found in the cache."""
    command = compile_command(emulate)
    # -march=native builds for this CPU: a cache shared with another CPU keeps both builds
    machine = cpu_model() + " " + " ".join(sorted(cpu_flags()))
    digest = hashlib.sha256("\0".join([*command, machine, source]).encode()).hexdigest()[:32]
    folder = cache_dir()
    library = folder / f"{digest}.so"
    if library.exists():
        return Build(library, cached=True)
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as work:
        src, out = Path(work) / "kernel.c", Path(work) / "kernel.so"
        src.write_text(source)
        try:
            done = subprocess.run([*command, str(src), "-o", str(out)], capture_output=True,
                                  text=True, timeout=COMPILE_TIMEOUT_S, check=False)
        except FileNotFoundError:
            return Build(None, missing_compiler(command[0]))
        except subprocess.TimeoutExpired:
            return Build(None, f"the compiler did not finish within {COMPILE_TIMEOUT_S:g} s")
        if done.returncode != 0:
            return Build(None, "compile error: " + complaint(done, command[0]))
        os.replace(out, library)  # atomic: a racing build of the same source writes the same
    return Build(library, seconds=time.perf_counter() - start)


def complaint(done: subprocess.CompletedProcess, program: str) -> str:
    """What a failed compile said: its first lines that name an error (else its first lines)."""
    lines = [ln for ln in done.stderr.splitlines() if "error" in ln] \
        or done.stderr.splitlines() or [f"{program} exited with {done.returncode}"]
    return " | ".join(lines[:4])[:800]


def missing_compiler(program: str) -> str:
    """Why a compile could not start: ``program`` is not on the PATH."""
    return f"no C compiler: {program!r} is not on the PATH (set CC)"
