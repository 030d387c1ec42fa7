"""Build and load the C++ CPU kernels (``kernels/csrc/*.cpp``) at first use.

The sources ship with the package; it is compiled with the system ``g++`` against torch's headers
(include and library paths from ``torch.utils.cpp_extension``) into a cache folder and loaded with
``torch.ops.load_library``; its ops then live under ``torch.ops.agent_engine``.

Invariants:
- The cached library's name carries a hash of the source, the torch version, the compiler flags and
  the CPU's instruction-set flags, so a changed source, torch or machine never loads a stale build.
- A build is published atomically (compiled to a temporary file, then renamed): concurrent
  processes never load a half-written library.
- :func:`load_cpu_ops` never raises: when the build or the load fails (no compiler, no headers,
  ``AGENT_ENGINE_CPP_KERNELS=0``) it logs one warning and returns False; callers then use the torch
  fallbacks in ``kernels.cpu_ops``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCES = tuple(Path(__file__).with_name("csrc") / n
                for n in ("cpu_ops.cpp", "paged_attention.cpp", "small_linear.cpp", "panel_linear.cpp", "kv_tier_copy.cpp",
                          "gguf_linear.cpp"))
HEADERS = tuple(Path(__file__).with_name("csrc") / n for n in ("vec_math.h", "attend_f32.h", "attend_tiled.h", "gguf_blocks.h",
                                                                "kquant_dot.h", "q32_dot.h", "panel_micro.h"))
ENV_SWITCH = "AGENT_ENGINE_CPP_KERNELS"  # "0" turns the C++ kernels off
_FLAGS = ["-O3", "-std=c++20", "-fPIC", "-shared", "-fopenmp", "-march=native", "-DNDEBUG",
          "-Wno-unused-parameter", "-D_GLIBCXX_USE_CXX11_ABI=" + str(int(torch._C._GLIBCXX_USE_CXX11_ABI))]

_lock = threading.Lock()
_state: dict[str, object] = {}


def cache_dir() -> Path:
    """Where built libraries live: ``$AGENT_ENGINE_CACHE/kernels`` (default ``~/.cache/agent-engine``)."""
    root = os.environ.get("AGENT_ENGINE_CACHE") or str(Path.home() / ".cache" / "agent-engine")
    return Path(root) / "kernels"


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return ""


def library_path() -> Path:
    """The cache path of the library for these sources, torch, flag set and CPU."""
    h = hashlib.sha256()
    parts = [src.read_bytes() for src in (*SOURCES, *HEADERS)]
    for part in (*parts, torch.__version__.encode(), " ".join(_FLAGS).encode(), _cpu_flags().encode()):
        h.update(part)
        h.update(b"\0")
    return cache_dir() / f"agent_engine_cpu_ops_{h.hexdigest()[:16]}.so"


def _compile(target: Path) -> None:
    """Compile the sources into ``target`` (atomic rename); raises on any failure."""
    from torch.utils import cpp_extension

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    includes = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    lib_dirs = cpp_extension.library_paths()
    libs = [f"-L{p}" for p in lib_dirs] + [f"-Wl,-rpath,{p}" for p in lib_dirs] + ["-lc10", "-ltorch_cpu"]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    cmd = [cxx, *_FLAGS, *includes, *(str(src) for src in SOURCES), "-o", tmp, *libs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"g++ failed ({proc.returncode}): {proc.stderr[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_cpu_ops() -> bool:
    """Build (if needed) and load the library once per process; True when ``torch.ops.agent_engine``
    has the ops. Thread-safe; a failure is remembered (and warned about) once."""
    with _lock:
        if "ok" in _state:
            return bool(_state["ok"])
        ok = False
        if os.environ.get(ENV_SWITCH, "1") == "0":
            logger.info("C++ CPU kernels disabled by %s=0; using the torch path", ENV_SWITCH)
        else:
            try:
                path = library_path()
                if not path.is_file():
                    logger.info("building the C++ CPU kernels into %s (once per machine)", path)
                    _compile(path)
                torch.ops.load_library(str(path))
                ok = hasattr(torch.ops.agent_engine, "paged_attention")
            except Exception as exc:  # noqa: BLE001 - any failure means: fall back, with a warning
                _state["error"] = f"{type(exc).__name__}: {exc}"
                logger.warning("C++ CPU kernels unavailable, using the slower torch path: %s", _state["error"])
        _state["ok"] = ok
        return ok


def load_error() -> str | None:
    """Why the last :func:`load_cpu_ops` failed (None if it succeeded or was not tried)."""
    err = _state.get("error")
    return None if err is None else str(err)
