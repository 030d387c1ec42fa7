"""Weights packed in column panels for the C++ ``panel_linear`` matmul (CPU, float32 or bfloat16).

``pack_weight(w)`` lays a ``[N, K]`` weight out as ``[ceil(N / 16), K, 16]``: panel p holds output
columns 16p .. 16p + 15, one row of 16 weights per k, zero past N. A bfloat16 weight keeps its dtype
and interleaves each row of 16 (column c at slot 2c for c < 8, at 2(c - 8) + 1 above), so the kernel
widens a row to float32 with a shift and a mask (``csrc/panel_linear.cpp``). Where the kernels' build
has bfloat16 products (``IsaVariant.bf16_products``: AVX512_BF16) a bfloat16 weight is packed in K
pairs instead, ``[ceil(N / 16), ceil(K / 2), 32]`` (lane c of pair row kp holds column c's weights at
k 2kp and 2kp + 1, a zero past K), which ``panel_linear`` multiplies by x rounded to bfloat16 in
``vdpbf16ps`` pairs (twice the multiply-adds per instruction of the widened float32 form; float32
sums). ``panel_linear``'s 6 x 16
register-blocked micro-kernel walks a panel with two vector loads per k; on this project's 2-core
AVX2 machine it runs a decode step's matmuls at the memory bandwidth (1 row) and at 75-145 GFLOP/s
from 16 rows up, ahead of the plain-weight kernels (``small_linear``, oneDNN, MKL) at every row
count up to about 128 rows and level above (``python -m benchmarks.kernels_bench``). The plain
weight stays: the transformers modules and the fallbacks use it, so packing costs one more copy of
every packed weight.

Invariants:
- :func:`pack_weight` returns None when the weight is not a float32 or bfloat16 CPU matrix (callers
  then use the plain weight alone); it never changes the weight, and its panels hold exactly its values.
- Pair panels (the last dimension 32) exist only for bfloat16 weights, and by default only where the
  kernels in use multiply them; ``panel_linear`` refuses them elsewhere.
- A packed weight is computed from the plain weight once and never updated: pack after loading,
  before serving, and do not pack weights that will change.
- :func:`prepack_allowed` decides once per model: ``AGENT_ENGINE_PREPACK=1`` packs, ``=0`` never;
  unset, the copies are made only when they take at most a quarter of the memory available now.
"""

from __future__ import annotations

import logging
import os

import torch

from kernels.cpp_build import bf16_products

logger = logging.getLogger(__name__)

ENV_SWITCH = "AGENT_ENGINE_PREPACK"  # "1" always pack, "0" never; unset: when memory allows
MEMORY_SHARE = 0.25  # most of the available memory the packed copies may take (unset switch)
PANEL = 16  # output columns per panel (two AVX2 registers; kPanel in csrc/panel_linear.cpp)
PANEL_DTYPES = (torch.float32, torch.bfloat16)


def pack_weight(weight: torch.Tensor, pairs: bool | None = None) -> torch.Tensor | None:
    """The ``[ceil(N / 16), K, 16]`` panels of a float32 or bfloat16 CPU ``[N, K]`` weight, or None; for a
    bfloat16 weight with ``pairs`` (default ``cpp_build.bf16_products()``) its ``[ceil(N / 16), ceil(K /
    2), 32]`` pair panels."""
    if weight.dim() != 2 or weight.dtype not in PANEL_DTYPES or weight.device.type != "cpu":
        return None
    n, k = weight.shape
    if weight.dtype == torch.bfloat16 and (bf16_products() if pairs is None else pairs):
        return _pair_panels(weight)
    with torch.no_grad():
        panels = (n + PANEL - 1) // PANEL
        padded = weight.new_zeros(panels * PANEL, k)
        padded[:n] = weight
        packed = padded.view(panels, PANEL, k).transpose(1, 2)
        if weight.dtype == torch.bfloat16:  # slot 2c + h <- column c + 8h
            packed = packed.reshape(panels, k, 2, PANEL // 2).transpose(2, 3)
        return packed.reshape(panels, k, PANEL).contiguous()


def _pair_panels(weight: torch.Tensor) -> torch.Tensor:
    """``[ceil(N / 16), ceil(K / 2), 32]``: lane 2c + j of pair row kp of panel p = weight[16p + c, 2kp + j]."""
    n, k = weight.shape
    panels, k2 = (n + PANEL - 1) // PANEL, (k + 1) // 2
    with torch.no_grad():
        padded = weight.new_zeros(panels * PANEL, 2 * k2)
        padded[:n, :k] = weight
        return padded.view(panels, PANEL, k2, 2).permute(0, 2, 1, 3).reshape(panels, k2, 2 * PANEL).contiguous()


def pack_gate_up(weight: torch.Tensor, intermediate: int, pairs: bool | None = None) -> torch.Tensor | None:
    """The panels of a fused ``[gate; up]`` weight ``[2 I, K]`` with gate's and up's panels interleaved
    (panel 2j: gate columns 16j .. 16j + 15, panel 2j + 1: the same up columns), as ``panel_linear_silu``
    reads them; None where ``pack_weight`` gives none or ``I`` is not a multiple of 16."""
    if weight.dim() != 2 or weight.shape[0] != 2 * intermediate or intermediate % PANEL:
        return None
    k = weight.shape[1]
    order = weight.view(2, intermediate // PANEL, PANEL, k).transpose(0, 1).reshape(2 * intermediate, k)
    return pack_weight(order, pairs)


def prepack_allowed(total_bytes: int, what: str = "in panels") -> bool:
    """Whether to keep packed copies of weights totalling ``total_bytes`` (see the module invariants);
    ``what``: the copies' kind, for the log line of a refusal."""
    switch = os.environ.get(ENV_SWITCH, "").strip()
    if switch in ("0", "1"):
        return switch == "1"
    available = _available_memory_bytes()
    allowed = available is not None and total_bytes <= MEMORY_SHARE * available
    if not allowed:
        logger.info("not packing %.0f MB of weights %s (available memory %s); set %s=1 to force",
                    total_bytes / 2**20, what, "unknown" if available is None else f"{available / 2**20:.0f} MB",
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
