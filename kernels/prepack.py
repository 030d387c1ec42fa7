"""Weights pre-packed in oneDNN's blocked layout, for the matmuls of more than a decode's few rows.

On CPU float32, oneDNN's matmul on a weight reordered once into its blocked layout runs 6-20% faster
than MKL's GEMM (and than oneDNN on the plain weight, which it repacks on every call) from about 24
rows up, a step with prompt chunks or a large decode batch (``python -m benchmarks.kernels_bench``).
The plain weight stays too: the C++ ``small_linear`` (decode steps of few rows) streams it, and the
transformers modules use it; so packing costs one more copy of every packed weight.

Invariants:
- :func:`pack_weight` never raises: it returns None when oneDNN is missing, the tensor is not a
  float32 CPU matrix, or the reorder fails; callers then use the plain weight alone.
- A packed weight is computed from the plain weight once and never updated: pack after loading,
  before serving, and do not pack weights that will change.
- :func:`prepack_allowed` decides once per model: ``AGENT_ENGINE_PREPACK=1`` packs, ``=0`` never;
  unset, the copies are made only when they take at most a quarter of the memory available now.
"""

from __future__ import annotations

import logging
import os

import torch

logger = logging.getLogger(__name__)

ENV_SWITCH = "AGENT_ENGINE_PREPACK"  # "1" always pack, "0" never; unset: when memory allows
MEMORY_SHARE = 0.25  # most of the available memory the packed copies may take (unset switch)
_PACK_ROWS_HINT = 32  # the row count oneDNN picks the layout for; it serves every row count


def pack_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """The oneDNN-packed copy of a float32 CPU ``[N, K]`` weight for ``torch.ops.mkldnn._linear_pointwise``,
    or None when it cannot be made."""
    if weight.dim() != 2 or weight.dtype != torch.float32 or weight.device.type != "cpu" \
            or not torch.backends.mkldnn.is_available():
        return None
    try:
        with torch.no_grad():
            return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), _PACK_ROWS_HINT)
    except (RuntimeError, AttributeError) as exc:  # an op missing from this torch build
        logger.info("oneDNN weight packing unavailable (%s): using the plain weights", exc)
        return None


def prepack_allowed(total_bytes: int) -> bool:
    """Whether to keep packed copies of weights totalling ``total_bytes`` (see the module invariants)."""
    switch = os.environ.get(ENV_SWITCH, "").strip()
    if switch in ("0", "1"):
        return switch == "1"
    available = _available_memory_bytes()
    allowed = available is not None and total_bytes <= MEMORY_SHARE * available
    if not allowed:
        logger.info("not packing %.0f MB of weights for oneDNN (available memory %s); set %s=1 to force",
                    total_bytes / 2**20, "unknown" if available is None else f"{available / 2**20:.0f} MB",
                    ENV_SWITCH)
    return allowed


def _available_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
