"""Matmul weights kept in a GGUF file's own quantized blocks (CPU): one copy of the weights.

:class:`QuantWeight` is one ``[N, K]`` weight as the file stores it: ``raw``, uint8 ``[N, row_bytes]``,
usually a zero-copy view of the memory-mapped file. The C++ kernels (``csrc/gguf_linear.cpp``)
multiply by those bytes directly, the way llama.cpp does: the activations are quantized to int8
per block (32 weights, or 256 for the K-quants: llama.cpp's Q8_0 / Q8_K) and each block's dot
product is an integer dot product (AVX-512 VNNI, AVX-VNNI, AVX2 or scalar, picked when the kernels
are compiled for the CPU), scaled by the block's scales. From the row count where it measured faster
on this CPU (``kernels.quant_routes``) a wide step (a prefill chunk, many streams) takes the other
route instead: the blocks dequantized to float32 a slice at a time, straight into the panel
micro-kernel (``csrc/gguf_wide.cpp``; in bfloat16 pairs where the kernels have them, or in AMX tiles
where the OS grants them: ``csrc/gguf_tiles.cpp``), or, from the row count where it measured faster, dequantized
to bfloat16 a chunk at a time for oneDNN's matmul (``kernels.onednn_wide``: AMX tiles where the OS
grants them). :class:`QuantMatmul` is a fused matmul of such parts (Q, K and
V; gate and up), each writing its own columns of one output.

Invariants:
- No copy of a weight is kept: its memory is its file bytes (``nbytes``), read once per step (per
  group of four rows of ``x``). ``rows(index)`` (llama's Q/K order) is the one copy, of the rows it
  reorders; the oneDNN form dequantizes into a per-thread scratch of at most
  ``onednn_wide.CHUNK_BYTES``, overwritten chunk by chunk.
- ``dequantize()`` gives the float32 weights of gguf-py's ``dequantize`` bit for bit (a zero may be +0
  where gguf-py has -0).
- :func:`quant_matmul` equals ``F.linear(x, dequantize(), bias)`` up to the int8 rounding of ``x`` on
  the int8 route (each block of ``x`` rounded to 8 bits of its largest magnitude; the tests bound the
  error at 2% of the largest output; on the served models' activations, docs/models.md states it),
  up to float32 summation order on the wide route (and, in its bfloat16 and tile forms, the rounding of
  ``x`` and of the dequantized weights to bfloat16: ``kernels.quant_routes``; in its oneDNN form the product
  rounded to bfloat16 as well).
- Only the types in ``GGML_BLOCKS`` are served; ``from_gguf`` refuses others with a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

import torch

from kernels.cpp_build import ops
from kernels.onednn_wide import onednn_wide
from kernels.quant_routes import QuantShape, wide_route

# GGML type id -> (name, weights per block, bytes per block): the types gguf_linear.cpp implements.
GGML_BLOCKS: dict[int, tuple[str, int, int]] = {
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144), 14: ("Q6_K", 256, 210),
}


@dataclass(frozen=True)
class QuantWeight:
    """One ``[N, K]`` weight in a GGUF file's blocks: ``raw`` uint8 ``[N, row_bytes]`` (rows
    contiguous), GGML type ``qtype``, ``in_features`` = K."""

    raw: torch.Tensor
    qtype: int
    in_features: int

    @classmethod
    def from_gguf(cls, raw: torch.Tensor, qtype: int, in_features: int) -> QuantWeight:
        """The weight whose blocks are ``raw`` (kept as given: a view of a memory-mapped file stays one)."""
        if qtype not in GGML_BLOCKS:
            raise ValueError(f"GGML type {qtype} is not served natively (types: {sorted(GGML_BLOCKS)})")
        name, block, nbytes = GGML_BLOCKS[qtype]
        if raw.dtype != torch.uint8 or raw.dim() != 2:
            raise ValueError("GGUF blocks are a uint8 [N, row_bytes] tensor")
        if in_features <= 0 or in_features % block or raw.shape[1] != in_features // block * nbytes:
            raise ValueError(f"{name} rows of {raw.shape[1]} bytes do not hold {in_features} weights in blocks of {block}")
        if raw.shape[0] > 0 and raw.stride(1) != 1:
            raw = raw.contiguous()
        return cls(raw, qtype, in_features)

    @property
    def type_name(self) -> str:
        return GGML_BLOCKS[self.qtype][0]

    @property
    def out_features(self) -> int:
        return int(self.raw.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes a pass over the weight reads."""
        return int(self.raw.shape[0] * self.raw.shape[1])

    def dequantize(self) -> torch.Tensor:
        """The float32 ``[N, K]`` weights (gguf-py's values, bit for bit but for the sign of a zero)."""
        out = torch.empty(self.out_features, self.in_features, dtype=torch.float32)
        ops().gguf_dequantize(out, self.raw, self.qtype)
        return out

    def rows(self, index: torch.Tensor) -> QuantWeight:
        """The weight with its output features reordered (a copy): row ``i`` is row ``index[i]``."""
        return QuantWeight(self.raw.index_select(0, index), self.qtype, self.in_features)

    def linear(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``x [M, K] @ W^T`` (float32, contiguous ``x``) into ``out`` (fresh if None; it may be a column
        slice of a wider matrix)."""
        if out is None:
            out = x.new_empty(x.shape[0], self.out_features)
        ops().gguf_linear_int8(out, x, [self.raw], [self.qtype])
        return out


@dataclass(frozen=True)
class QuantMatmul:
    """A matmul whose output features are the concatenation of ``parts`` (each one GGML type)."""

    parts: tuple[QuantWeight, ...]

    @classmethod
    def of(cls, parts: Sequence[QuantWeight]) -> QuantMatmul:
        """The fused matmul of ``parts`` (one input width); nothing is concatenated."""
        if not parts or len({p.in_features for p in parts}) != 1:
            raise ValueError("a fused quantized matmul needs parts of one input width")
        return cls(tuple(parts))

    @property
    def in_features(self) -> int:
        return self.parts[0].in_features

    @property
    def out_features(self) -> int:
        return sum(p.out_features for p in self.parts)

    @cached_property
    def shape(self) -> QuantShape:
        """What the route calibration is keyed by: input width and (type, rows) per part."""
        return QuantShape(self.in_features, tuple((p.qtype, p.out_features) for p in self.parts))

    @property
    def raws(self) -> list[torch.Tensor]:
        """Every part's blocks, in order (the kernels' argument)."""
        return [p.raw for p in self.parts]

    @property
    def qtypes(self) -> list[int]:
        return [p.qtype for p in self.parts]

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def dequantize(self) -> torch.Tensor:
        return torch.cat([p.dequantize() for p in self.parts])

    def embedding(self, ids: torch.Tensor) -> torch.Tensor:
        """The float32 rows ``ids`` ``[T, K]`` of the (one-part) weight: an embedding lookup that
        dequantizes only the rows it reads."""
        if len(self.parts) != 1:
            raise ValueError("an embedding is one quantized weight")
        return self.parts[0].rows(ids.reshape(-1).to(torch.int64)).dequantize()


class QuantForm(Enum):
    """The kernel a matmul on GGUF blocks takes for a step: :func:`quant_form`'s answer."""

    INT8 = "int8"  # gguf_linear_int8
    WIDE_F32 = "wide_f32"  # gguf_linear_wide
    WIDE_BF16 = "wide_bf16"  # gguf_linear_wide in bfloat16 products
    WIDE_TILES = "wide_tiles"  # gguf_linear_tiles: AMX tiles (bfloat16 products)
    ONEDNN = "onednn"  # the wide route's oneDNN form (kernels.onednn_wide)


def quant_form(weight: QuantMatmul, rows: int) -> QuantForm:
    """The kernel a step of ``rows`` rows takes for this weight's shape on this CPU (its measured route,
    ``kernels.quant_routes``): the one choice :func:`quant_matmul` and the layer stack both follow."""
    route = wide_route(weight.shape)
    if rows >= route.onednn_from:
        return QuantForm.ONEDNN
    if rows < route.from_rows:
        return QuantForm.INT8
    if route.tiles:
        return QuantForm.WIDE_TILES
    return QuantForm.WIDE_BF16 if route.bf16 else QuantForm.WIDE_F32


def quant_matmul(x: torch.Tensor, weight: QuantMatmul, bias: torch.Tensor | None = None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight.dequantize(), bias)`` up to the rounding of its route (see the module's
    invariants) for a contiguous float32 ``[M, K]`` ``x`` on CPU; into ``out`` ``[M, N]`` when given.
    One kernel call, every part's rows in one parallel region, each part writing its own columns, by
    :func:`quant_form`: the int8 route, the wide one (in float32, bfloat16 products or AMX tiles) or its
    oneDNN form."""
    if out is None:
        out = x.new_empty(x.shape[0], weight.out_features)
    form = quant_form(weight, x.shape[0])
    if form is QuantForm.ONEDNN:
        onednn_wide(out, x, weight.raws, weight.qtypes)
    elif form is QuantForm.INT8:
        ops().gguf_linear_int8(out, x, weight.raws, weight.qtypes)
    elif form is QuantForm.WIDE_TILES:
        ops().gguf_linear_tiles(out, x, weight.raws, weight.qtypes, False)
    else:
        ops().gguf_linear_wide(out, x, weight.raws, weight.qtypes, form is QuantForm.WIDE_BF16)
    return out if bias is None else out.add_(bias)
