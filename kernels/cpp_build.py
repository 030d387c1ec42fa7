"""Build and load the C++ CPU kernels (``kernels/csrc/*.cpp``) at first use, one library per
instruction-set variant (``kernels.isa``).

The sources ship with the package; each variant is compiled with the system ``g++`` against torch's
headers (include and library paths from ``torch.utils.cpp_extension``) into a cache folder, one object
per source in parallel, and loaded with ``torch.ops.load_library``; its ops then live under
``torch.ops.agent_engine_<variant>``, which :func:`ops` returns for the variant this process selected.

Invariants:
- The cached library's name carries a hash of the sources, the torch version and the variant's compiler
  flags, never of the machine: a library is portable to every CPU that supports its variant, and a
  changed source or torch never loads a stale build.
- A build is published atomically (compiled to a temporary file, then renamed): concurrent
  processes never load a half-written library.
- A bad ``AGENT_ENGINE_ISA`` is refused before anything slow: :func:`check_forced_variant` (called first
  when an engine is built, before its model loads) raises the same ``ValueError`` :func:`load_cpu_ops`
  would, reading only ``/proc/cpuinfo``.
- :func:`load_cpu_ops` raises only for a bad ``AGENT_ENGINE_ISA`` (``ValueError``); when the selected
  variant's build or load fails it takes the next supported variant that builds (unless one was
  forced), with one warning; when none does (no compiler, no headers) or ``AGENT_ENGINE_CPP_KERNELS=0``
  it returns False, with one warning, and callers use the torch fallbacks in ``kernels.cpu_ops``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from kernels.isa import ENV_FORCE, ENV_SWITCH, IsaVariant, cap_libraries, selected_variant, supported_variants

logger = logging.getLogger(__name__)

_CSRC = Path(__file__).with_name("csrc")
SOURCES = tuple(_CSRC / n for n in ("cpu_ops.cpp", "paged_attention.cpp", "small_linear.cpp", "panel_linear.cpp",
                                    "kv_tier_copy.cpp", "gguf_linear.cpp", "gguf_wide.cpp", "gguf_tiles.cpp", "panel_tiles.cpp",
                                    "decoder_layers.cpp"))
# Every header beside the sources (a library's name hashes them all: an edited header is a new build).
HEADERS = tuple(sorted(_CSRC.glob("*.h")))
_FLAGS = ("-O3", "-std=c++20", "-fPIC", "-fopenmp", "-fvisibility=hidden", "-DNDEBUG", "-Wno-unused-parameter",
          "-D_GLIBCXX_USE_CXX11_ABI=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))

_lock = threading.Lock()
_loaded: dict[str, bool] = {}  # variant name -> whether its library loaded
_switched_off_logged = False  # AGENT_ENGINE_CPP_KERNELS=0 is logged once per process
_errors: dict[str, str] = {}
_warned: set[str] = set()  # warnings already logged
_active: dict[str, IsaVariant | None] = {}  # AGENT_ENGINE_ISA value -> the variant in use (active_variant)


def cache_dir() -> Path:
    """Where built libraries (and measured routes) live: ``kernels`` under the cache root that
    ``agent_engine.paths.cache_root`` names (``$AGENT_ENGINE_CACHE``, else ``$XDG_CACHE_HOME/agent-engine``,
    else ``~/.cache/agent-engine``); the same rule spelled here because kernels sit below agent_engine
    (a test holds the two equal)."""
    explicit, xdg = os.environ.get("AGENT_ENGINE_CACHE"), os.environ.get("XDG_CACHE_HOME")
    if explicit:
        root = Path(explicit).expanduser()
    elif xdg:
        root = Path(xdg).expanduser() / "agent-engine"
    else:
        root = Path.home() / ".cache" / "agent-engine"
    return root / "kernels"


def compile_flags(variant: IsaVariant) -> tuple[str, ...]:
    """Every compiler flag of ``variant``'s objects: the common ones, its ISA, its op namespace."""
    return (*_FLAGS, *variant.flags, f"-DAE_OPS_NS={variant.namespace}")


def library_path(variant: IsaVariant) -> Path:
    """The cache path of ``variant``'s library for these sources and this torch."""
    h = hashlib.sha256()
    parts = [src.read_bytes() for src in (*SOURCES, *HEADERS)]
    for part in (*parts, torch.__version__.encode(), " ".join(compile_flags(variant)).encode()):
        h.update(part)
        h.update(b"\0")
    return cache_dir() / f"agent_engine_cpu_ops_{variant.name}_{h.hexdigest()[:16]}.so"


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"g++ failed ({proc.returncode}): {proc.stderr[-2000:]}")


def _compile(target: Path, variant: IsaVariant) -> None:
    """Compile the sources into ``target`` (one object per source, in parallel, then one link; atomic
    rename); raises on any failure."""
    from torch.utils import cpp_extension

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    includes = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    lib_dirs = cpp_extension.library_paths()
    libs = [f"-L{p}" for p in lib_dirs] + [f"-Wl,-rpath,{p}" for p in lib_dirs] + ["-lc10", "-ltorch_cpu"]
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = list(compile_flags(variant))
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        objects = [str(Path(work) / f"{src.stem}.o") for src in SOURCES]
        compiles = [[cxx, *flags, *includes, "-c", str(src), "-o", obj] for src, obj in zip(SOURCES, objects, strict=True)]
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            list(pool.map(_run, compiles))
        linked = str(Path(work) / "lib.so")
        _run([cxx, "-shared", "-fopenmp", *objects, "-o", linked, *libs])
        os.replace(linked, target)


def load_variant(variant: IsaVariant) -> bool:
    """Build (if needed) and load ``variant``'s library once per process; True when
    ``torch.ops.<variant.namespace>`` has the ops. Thread-safe; a failure is remembered (its reason for
    :func:`load_error`) and not retried. The caller makes sure the CPU supports the variant."""
    with _lock:
        if variant.name in _loaded:
            return _loaded[variant.name]
        ok = False
        try:
            path = library_path(variant)
            if not path.is_file():
                logger.info("building the C++ CPU kernels (%s) into %s (once per machine)", variant.name, path)
                _compile(path, variant)
            torch.ops.load_library(str(path))
            ok = hasattr(getattr(torch.ops, variant.namespace), "paged_attention")
        except Exception as exc:  # noqa: BLE001 - any failure means: fall back, with a warning
            _errors[variant.name] = f"{type(exc).__name__}: {exc}"
        _loaded[variant.name] = ok
        return ok


def active_variant() -> IsaVariant | None:
    """The variant whose library this process uses: the selected one (``kernels.isa.selected_variant``)
    or, when its build fails and none was forced by ``AGENT_ENGINE_ISA``, the next one the CPU supports
    that builds (a toolchain too old for the best variant's flags still gets vector kernels); None when
    ``AGENT_ENGINE_CPP_KERNELS=0`` or nothing builds. Decided once per ``AGENT_ENGINE_ISA`` value (a
    dict lookup after that: the attention and matmul dispatchers ask on every call); each outcome is
    logged once."""
    global _switched_off_logged
    if os.environ.get(ENV_SWITCH, "1") == "0":
        if not _switched_off_logged:
            _switched_off_logged = True
            logger.info("C++ CPU kernels disabled by %s=0; using the torch path", ENV_SWITCH)
        return None
    forced = os.environ.get(ENV_FORCE, "").strip()
    try:
        return _active[forced]
    except KeyError:
        pass
    selected = selected_variant()
    if forced:
        cap_libraries()
    found = next((v for v in ([selected] if forced else supported_variants()) if load_variant(v)), None)
    if found is None:
        _warn_once(f"C++ CPU kernels ({selected.name}) unavailable, using the slower torch path: "
                   f"{_errors.get(selected.name)}")
    elif found != selected:
        _warn_once(f"C++ CPU kernels ({selected.name}) did not build, using {found.name}: "
                   f"{_errors.get(selected.name)}")
    with _lock:
        _active[forced] = found
    return found


def _warn_once(message: str) -> None:
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    logger.warning("%s", message)


def check_forced_variant() -> None:
    """``ValueError`` now when ``AGENT_ENGINE_ISA`` names a variant that is unknown or that this CPU does
    not run (what :func:`active_variant` would raise at the first kernel call); nothing when it is unset
    or the kernels are switched off (``AGENT_ENGINE_CPP_KERNELS=0``). A forced variant caps torch's
    libraries to its level here (``isa.cap_libraries``), before they first run. Builds and loads nothing."""
    if os.environ.get(ENV_SWITCH, "1") != "0" and os.environ.get(ENV_FORCE, "").strip():
        selected_variant()
        cap_libraries()


def bf16_products() -> bool:
    """Whether the kernels in use (:func:`active_variant`) multiply bfloat16 pairs (``vdpbf16ps``): what
    decides the bfloat16 weight layout (``kernels.prepack``) and the GGUF wide route's forms
    (``kernels.quant_routes``)."""
    variant = active_variant()
    return variant is not None and variant.bf16_products


def tile_kernels() -> bool:
    """Whether the kernels in use have the AMX tile matmuls (``gguf_linear_tiles``, ``panel_linear_tiles``:
    a build for AVX512_BF16 by a compiler that knows AMX); whether the CPU may run them is
    ``kernels.amx``'s question."""
    return bf16_products() and bool(ops().tiles_built())


def load_cpu_ops() -> bool:
    """Build (if needed) and load the kernels (:func:`active_variant`); True when :func:`ops` has them.
    False when ``AGENT_ENGINE_CPP_KERNELS=0`` or no supported variant builds."""
    return active_variant() is not None


def variant_ops(variant: IsaVariant) -> torch._ops._OpNamespace:
    """``variant``'s op namespace (``torch.ops.agent_engine_<variant>``); its ops exist once
    :func:`load_variant` returned True."""
    return getattr(torch.ops, variant.namespace)


@functools.cache
def ops() -> torch._ops._OpNamespace:
    """The active variant's op namespace (:func:`active_variant`, fixed at the first call); call after
    :func:`load_cpu_ops` returned True."""
    return variant_ops(active_variant() or selected_variant())


def load_error() -> str | None:
    """Why the selected variant's last load failed (None if it succeeded, was not tried or the kernels
    are switched off)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    return _errors.get(selected_variant().name)
