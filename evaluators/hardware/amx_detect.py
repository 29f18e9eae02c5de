"""Whether this machine can run AMX tiles: the CPU's flags and the Linux permission call
(``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, kernel 5.16 or later). Standard library
only: the measuring worker imports it too."""

from __future__ import annotations

import ctypes
import os
import platform
from functools import cache

REQUIRED_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
HIDE_VARIABLE = "DSE_AMX_HIDE"  # set to 1: behave as on a CPU without AMX
SYS_ARCH_PRCTL = 158  # x86-64
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def cpu_flags() -> set[str]:
    """The flags of the first CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


@cache
def _permission_problem() -> str | None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0:
        errno = ctypes.get_errno()
        return (f"Linux refused the tile state: arch_prctl(ARCH_REQ_XCOMP_PERM, 18) failed "
                f"with {os.strerror(errno)} (a kernel of 5.16 or later is needed)")
    return None


VECTOR_FLAGS = {"int8-int32": "avx512_vnni", "bf16-fp32": "avx512_bf16"}


def vector_problem(dtype: str) -> str | None:
    """Why the AVX-512 kernels of ``dtype`` cannot run here, or None when they can."""
    flag = VECTOR_FLAGS[dtype]
    if flag not in cpu_flags():
        return f"this CPU ({cpu_model()}) lacks {flag}, which engine=avx512 needs for {dtype}"
    return None


def amx_problem() -> str | None:
    """Why AMX cannot run here (what is missing), or None when it can."""
    if os.environ.get(HIDE_VARIABLE, "") not in ("", "0"):
        return f"AMX is hidden by {HIDE_VARIABLE}={os.environ[HIDE_VARIABLE]}"
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"AMX needs Linux on x86-64, not {platform.system()} on {platform.machine()}"
    missing = [flag for flag in REQUIRED_FLAGS if flag not in cpu_flags()]
    if missing:
        return (f"this CPU ({cpu_model()}) has no AMX: its flags lack {', '.join(missing)} "
                "(AMX is on Intel Xeon from Sapphire Rapids on)")
    return _permission_problem()
