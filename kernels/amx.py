"""Intel AMX on this machine: whether the CPU lists its tile units and whether Linux grants this process
their state.

AMX multiplies 16 x 32 bfloat16 (or 16 x 64 int8) tiles per instruction, several times the AVX-512
FMA rate. Listing the units in ``/proc/cpuinfo`` is not enough to use them: Linux (5.16 and later)
hands a process the tile data state only after it asks with ``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)``, and a tile instruction run without it faults; a hypervisor may list the units
and still refuse. :func:`amx_state` asks once per process and reports what it got; oneDNN (torch's
matmuls, the bfloat16 route of ``kernels.linear_routes``) asks the same way and multiplies in tiles
only when granted, so every use of the tiles in this process follows one answer.

Invariants:
- Nothing here runs a tile instruction: a machine that lists AMX and refuses its state gets one log
  line and the other routes, never a fault. Our own tile kernels (``csrc/amx_tiles.h``) are routes
  only where :func:`tiles_ready`, and check CPUID and the grant again before they run.
- :func:`amx_state` never raises: an unreadable ``/proc/cpuinfo``, a non-x86-64 machine or a C library
  without ``syscall`` read as "not listed" or "refused", with the reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import sys
from dataclasses import dataclass
from functools import cache

from kernels.isa import AMX_FLAGS, ENV_FORCE, cpu_flags, onednn_below_bf16, routing_flags

logger = logging.getLogger(__name__)

SYS_ARCH_PRCTL = 158  # x86-64
ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


@dataclass(frozen=True)
class AmxState:
    """``listed``: the AMX flags the CPU reports; ``granted``: the OS gave this process the tile state;
    ``why``: in words, for logs and benchmark tables."""

    listed: tuple[str, ...]
    granted: bool
    why: str
    set_aside: bool = False  # listed, but a forced variant (``AGENT_ENGINE_ISA``) routes as a CPU without it

    @property
    def usable(self) -> bool:
        """Tiles usable for bfloat16 products (``amx_bf16`` listed and the state granted)."""
        return self.granted and "amx_bf16" in self.listed


def request_tile_state() -> tuple[bool, str]:
    """Ask Linux for the AMX tile data state for this process: (granted, reason)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return False, f"not Linux on x86-64 ({sys.platform}, {platform.machine()})"
    if ctypes.sizeof(ctypes.c_void_p) != 8:  # a 32-bit process: 158 is another system call there
        return False, "not a 64-bit process"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError) as exc:
        return False, f"no syscall() in the C library ({exc})"
    syscall.restype = ctypes.c_long
    if syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_REQ_XCOMP_PERM),
               ctypes.c_ulong(XFEATURE_XTILEDATA)) != 0:
        err = ctypes.get_errno()
        return False, f"the OS refused the tile state (arch_prctl: {os.strerror(err) if err else 'error'})"
    bits = ctypes.c_ulong(0)
    if syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_GET_XCOMP_PERM), ctypes.byref(bits)) != 0:
        return False, "the OS accepted the request but reports no permission"
    if not bits.value & (1 << XFEATURE_XTILEDATA):
        return False, "the OS accepted the request but did not grant the tile data state"
    return True, "granted by the OS"


def state_for(flags: frozenset[str]) -> AmxState:
    """What a CPU with ``flags`` gives this process (asks the OS only when the tile units are listed)."""
    listed = tuple(f for f in AMX_FLAGS if f in flags)
    if "amx_tile" not in listed:
        return AmxState(listed, False, "not listed by the CPU")
    granted, why = request_tile_state()
    return AmxState(listed, granted, why)


@cache
def amx_state() -> AmxState:
    """This process's AMX state (asked once; one log line where the CPU lists AMX). A forced variant
    below ``avx512_bf16`` sets the units aside without asking the OS (``isa.routing_flags``)."""
    listed = tuple(f for f in AMX_FLAGS if f in cpu_flags())
    if "amx_tile" in listed and "amx_tile" not in routing_flags():  # only ever under a forced variant
        logger.info("the CPU lists AMX but %s=%s routes as a CPU without it", ENV_FORCE, os.environ.get(ENV_FORCE))
        return AmxState(listed, False, f"set aside by {ENV_FORCE}", set_aside=True)
    state = state_for(cpu_flags())
    if state.listed and not state.granted:
        logger.warning("the CPU lists AMX (%s) but %s: matmuls use the AVX-512 routes", ", ".join(state.listed),
                       state.why)
    elif state.granted:
        logger.info("AMX tiles (%s) granted: oneDNN's bfloat16 matmuls may use them where they measure faster",
                    ", ".join(state.listed))
    return state


TILES_SWITCH = "AGENT_ENGINE_AMX_TILES"  # "0": our own tile kernels are no route (oneDNN's tiles stay)


def tiles_ready() -> bool:
    """Whether this process may multiply in our own AMX tile kernels: not switched off
    (``AGENT_ENGINE_AMX_TILES=0``), bfloat16 tiles usable here and the kernels in use built with them
    (``cpp_build.tile_kernels``)."""
    from kernels.cpp_build import tile_kernels

    return os.environ.get(TILES_SWITCH, "1") != "0" and amx_state().usable and tile_kernels()


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively for oneDNN: AVX512_BF16 (as the routes see the CPU,
    ``isa.routing_flags``), or AMX tiles granted; and oneDNN is not capped below that level
    (``ONEDNN_MAX_CPU_ISA``)."""
    if onednn_below_bf16():
        return False  # oneDNN is capped below its bfloat16 kernels (a forced variant, or the user)
    return "avx512_bf16" in routing_flags() or amx_state().usable


def describe() -> str:
    """``AMX: ...`` in a few words, for the machine line of benchmark tables."""
    state = amx_state()
    if not state.listed:
        return "AMX: none"
    verdict = "set aside" if state.set_aside else "granted" if state.granted else "refused"
    return f"AMX: {'/'.join(f.removeprefix('amx_') for f in state.listed)} {verdict}"
