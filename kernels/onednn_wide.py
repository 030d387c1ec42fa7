"""The oneDNN form of a GGUF matmul's wide route: the weights dequantized to bfloat16 a chunk at a time,
multiplied by oneDNN's bfloat16 matmul.

On a CPU with AMX whose OS grants the tile state (``kernels.amx``) oneDNN multiplies bfloat16 in tiles,
several times the rate of the AVX-512 kernels of ``gguf_linear_wide``; a prefill step of hundreds of
rows then pays the dequantization (one pass over the weight, writing bfloat16) many times over. No
second copy of the weights is kept: each part of a fused matmul is dequantized ``CHUNK_BYTES`` of
bfloat16 at a time into one scratch buffer per thread, multiplied, and its columns written into the
output. Whether this form runs for a shape is measured (``kernels.quant_routes``), never assumed.

Invariants:
- :func:`onednn_wide` computes ``x @ dequantize()^T`` with ``x`` and the weights rounded to bfloat16
  (to nearest even), float32 sums, and each product rounded to bfloat16 before it is widened into
  the float32 ``out``.
- The scratch buffer holds at most ``CHUNK_BYTES`` and is reused by every call on its thread (a call
  never sees another call's weights: each chunk is written before it is multiplied).
- :func:`available` is where the form is timed at all: oneDNN is there and the CPU multiplies
  bfloat16 natively (AVX512_BF16, or AMX tiles granted); elsewhere oneDNN emulates bfloat16 and the
  form is not measured.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import torch

from kernels.linear_routes import onednn_has

CHUNK_BYTES = 32 << 20  # bfloat16 weights dequantized per chunk (a few L3-sized passes per big matmul)
_local = threading.local()


def available() -> bool:
    """Whether this CPU and torch have the form natively (see the module invariants): where oneDNN's
    bfloat16 matmul is a route (``linear_routes.onednn_has``)."""
    return onednn_has("bfloat16")


def _scratch(elements: int) -> torch.Tensor:
    """This thread's bfloat16 scratch of at least ``elements`` (grown on demand, never shrunk)."""
    buf = getattr(_local, "buf", None)
    if buf is None or buf.numel() < elements:
        buf = torch.empty(elements, dtype=torch.bfloat16)
        _local.buf = buf
    return buf[:elements]


def onednn_wide(out: torch.Tensor, x: torch.Tensor, raws: Sequence[torch.Tensor], qtypes: Sequence[int]) -> None:
    """``out [M, sum N_i] = x [M, K] @ [W_1; W_2; ...]^T`` for the GGUF parts ``raws`` (uint8 ``[N_i,
    row_bytes]``) of ``qtypes``, in bfloat16 by oneDNN (see the module invariants)."""
    from kernels.cpp_build import ops

    k = x.shape[1]
    xb = x.to(torch.bfloat16)
    rows_per_chunk = max(1, CHUNK_BYTES // (2 * k))
    col = 0
    for raw, qtype in zip(raws, qtypes, strict=True):
        n = raw.shape[0]
        for n0 in range(0, n, rows_per_chunk):
            n1 = min(n, n0 + rows_per_chunk)
            weight = _scratch((n1 - n0) * k).view(n1 - n0, k)
            ops().gguf_dequantize(weight, raw[n0:n1], qtype)
            out[:, col + n0 : col + n1].copy_(torch.ops.mkldnn._linear_pointwise(xb, weight, None, "none", [], ""))
        col += n
