"""The instruction-set variants the C++ kernels are built for, and which one this CPU runs.

The kernels (``kernels/csrc``) pick their vector code when they are compiled (``#ifdef __AVX512VNNI__``
and the like). Rather than compile them for "this machine" (``-march=native``), each variant is a
named, portable flag set, and the process loads the best variant the CPU reports it can run: a
library built on one machine runs correctly on any other CPU that has its variant's features (the
way llama.cpp's ``GGML_CPU_ALL_VARIANTS`` builds one backend per ISA level and scores them at run time).

Invariants:
- ``VARIANTS`` is ordered best first; every variant's ``requires`` are ``/proc/cpuinfo`` flag names
  that imply every instruction its ``flags`` let the compiler emit, so a supported variant never
  faults. ``baseline`` requires nothing on x86-64 and always runs.
- Each variant registers its ops under its own torch namespace (``agent_engine_<name>``), so several
  can be loaded in one process and compared on the same inputs.
- ``AGENT_ENGINE_ISA=<name>`` forces a variant; a name that is unknown or not supported by this CPU
  is refused with a ``ValueError`` naming the supported ones.
- A forced variant is the CPU the whole process routes for, not only our kernels' build: the routes
  read :func:`routing_flags` (the vector features past the variant's set aside, AMX with every variant
  below ``avx512_bf16``), and :func:`cap_libraries` caps torch's own libraries (oneDNN, ATen's vector
  kernels, MKL) to the variant's level through their documented switches, so that forcing ``avx2`` on
  an AVX-512 CPU measures what an AVX2 CPU would run (a proxy), not our AVX2 kernels beside oneDNN's
  AVX-512 ones.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ENV_FORCE = "AGENT_ENGINE_ISA"
ENV_SWITCH = "AGENT_ENGINE_CPP_KERNELS"  # "0" turns the C++ kernels off (and with them any forced variant)
# The /proc/cpuinfo flags of vector extensions and matrix units: what a forced variant may set aside.
_VECTOR_PREFIXES = ("avx", "amx")
AMX_FLAGS = ("amx_tile", "amx_bf16", "amx_int8")  # the names of Intel AMX's units

_X86_64_V3 = frozenset({"avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "abm"})
_X86_64_V4 = _X86_64_V3 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}


@dataclass(frozen=True)
class IsaVariant:
    """One build of the kernels: ``flags`` for the compiler, ``requires`` of the CPU, and what it
    enables in words (``describes``). ``bf16_products``: the build has the bfloat16-pair kernels
    (``vdpbf16ps``; exactly where the flags enable AVX512_BF16), so ``gguf_linear_wide(..., bf16=True)``
    runs instead of raising."""

    name: str
    flags: tuple[str, ...]
    requires: frozenset[str]
    describes: str
    bf16_products: bool = False

    @property
    def namespace(self) -> str:
        """The torch op namespace the variant's library registers (``torch.ops.<namespace>``)."""
        return f"agent_engine_{self.name}"

    def supported_by(self, cpu_flags: frozenset[str]) -> bool:
        return self.requires <= cpu_flags


def _x86_variants() -> tuple[IsaVariant, ...]:
    return (
        IsaVariant("avx512_bf16", ("-march=x86-64-v4", "-mavx512vnni", "-mavx512bf16", "-mtune=generic"),
                   _X86_64_V4 | {"avx512_vnni", "avx512_bf16"},
                   "AVX-512 F/BW/VL with VNNI int8 and BF16 dot products", bf16_products=True),
        IsaVariant("avx512_vnni", ("-march=x86-64-v4", "-mavx512vnni", "-mtune=generic"),
                   _X86_64_V4 | {"avx512_vnni"}, "AVX-512 F/BW/VL with VNNI int8 dot products"),
        IsaVariant("avx512", ("-march=x86-64-v4", "-mtune=generic"), _X86_64_V4, "AVX-512 F/BW/VL"),
        IsaVariant("avx2_vnni", ("-march=x86-64-v3", "-mavxvnni", "-mtune=generic"),
                   _X86_64_V3 | {"avx_vnni"}, "AVX2 + FMA with AVX-VNNI int8 dot products"),
        IsaVariant("avx2", ("-march=x86-64-v3", "-mtune=generic"), _X86_64_V3, "AVX2 + FMA"),
        IsaVariant("baseline", ("-march=x86-64", "-mtune=generic"), frozenset(), "SSE2 (scalar kernels)"),
    )


def _other_variants() -> tuple[IsaVariant, ...]:
    """Off x86-64 the kernels have no hand-written vector code: one build for the host's features."""
    flag = "-mcpu=native" if platform.machine() in ("aarch64", "arm64") else "-march=native"
    return (IsaVariant("native", (flag,), frozenset(), f"the compiler's {flag} (scalar kernels)"),)


VARIANTS: tuple[IsaVariant, ...] = _x86_variants() if platform.machine() in ("x86_64", "AMD64") else _other_variants()


@cache
def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The feature flags the kernel reports for the first CPU (empty when unreadable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@cache
def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` when unreadable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def supported_variants(flags: frozenset[str] | None = None) -> tuple[IsaVariant, ...]:
    """The variants this CPU (or ``flags``) can run, best first."""
    have = cpu_flags() if flags is None else flags
    return tuple(v for v in VARIANTS if v.supported_by(have))


def variant_named(name: str, flags: frozenset[str] | None = None) -> IsaVariant:
    """The supported variant called ``name``; ``ValueError`` naming the choices otherwise."""
    supported = supported_variants(flags)
    for v in supported:
        if v.name == name:
            return v
    known = [v.name for v in VARIANTS]
    why = "unknown" if name not in known else "not supported by this CPU"
    raise ValueError(f"instruction-set variant {name!r} is {why}; this CPU runs: {[v.name for v in supported]}")


def selected_variant(flags: frozenset[str] | None = None) -> IsaVariant:
    """The variant this process loads: ``AGENT_ENGINE_ISA`` when set, else the best supported one."""
    forced = os.environ.get(ENV_FORCE, "").strip()
    if forced:
        return variant_named(forced, flags)
    return supported_variants(flags)[0]


def forced_variant() -> IsaVariant | None:
    """The variant ``AGENT_ENGINE_ISA`` forces, or None when it is unset, when the C++ kernels are off
    (``AGENT_ENGINE_CPP_KERNELS=0``: the variable then means nothing) or when it names no variant this
    CPU runs (that name is refused where an engine is built: :func:`selected_variant`)."""
    forced = os.environ.get(ENV_FORCE, "").strip()
    if not forced or os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    try:
        return variant_named(forced)
    except ValueError:
        return None


def routing_flags() -> frozenset[str]:
    """The CPU's flags as the routes read them: all of them, or under a forced variant its AVX and AMX
    flags only where the variant has them (its ``requires``, plus the AMX units where it is the
    bfloat16 variant, whose build holds the tile kernels); every other flag stays."""
    flags = cpu_flags()
    variant = forced_variant()
    if variant is None:
        return flags
    keep = variant.requires | (frozenset(AMX_FLAGS) if variant.bf16_products else frozenset())
    return frozenset(f for f in flags if not f.startswith(_VECTOR_PREFIXES) or f in keep)


# Torch's libraries capped to a forced variant's level (their documented environment switches, read
# when each library first runs); the best variant caps nothing. ``baseline`` caps oneDNN at SSE4.1,
# the lowest level it has, and MKL at SSE4.2 likewise (the variant itself is SSE2).
LIBRARY_CAPS: dict[str, dict[str, str]] = {
    "avx512_vnni": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "avx2_vnni": {"ONEDNN_MAX_CPU_ISA": "AVX2_VNNI", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "baseline": {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
}


CAPPED_NAMES = tuple(sorted({name for caps in LIBRARY_CAPS.values() for name in caps}))
# oneDNN reads its cap under this older name too (where the newer one is unset).
_ONEDNN_ALIASES = {"ONEDNN_MAX_CPU_ISA": "DNNL_MAX_CPU_ISA"}
# oneDNN's ISA levels below the one that multiplies bfloat16 natively.
_ONEDNN_BELOW_BF16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})


def _cap_value(name: str) -> str:
    """A cap's value in this environment, under its name or oneDNN's older one ('' when neither)."""
    return os.environ.get(name, "").strip() or os.environ.get(_ONEDNN_ALIASES.get(name, ""), "").strip()


def library_caps_set() -> dict[str, str]:
    """The caps on torch's libraries this environment sets (by :func:`cap_libraries` or by the user)."""
    return {name: value for name in CAPPED_NAMES if (value := _cap_value(name))}


def onednn_below_bf16() -> bool:
    """Whether oneDNN is capped below its bfloat16 kernels here (it then refuses a bfloat16 matmul)."""
    return _cap_value("ONEDNN_MAX_CPU_ISA").upper() in _ONEDNN_BELOW_BF16


def cap_libraries() -> dict[str, str]:
    """Under a forced variant, set its ``LIBRARY_CAPS`` in this process's environment where the user set
    none (a library already running keeps its level: the engine calls this before its model loads);
    returns what was set."""
    variant = forced_variant()
    caps = LIBRARY_CAPS.get(variant.name, {}) if variant is not None else {}
    added = {k: v for k, v in caps.items() if not _cap_value(k)}
    os.environ.update(added)
    return added


def describe(variant: IsaVariant | None = None) -> str:
    """One line naming the CPU and the kernels' variant (default: the selected one; pass the one in use,
    ``cpp_build.active_variant()``, where it differs), for benchmark tables and logs."""
    v = variant or selected_variant()
    return f"{cpu_model()} · kernels {v.name} ({v.describes})"
