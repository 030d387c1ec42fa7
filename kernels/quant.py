"""Matmul weights kept in their GGUF quantized blocks (CPU), multiplied by the C++ ``quant_linear``.

A decode step of a few streams is bound by the weights it reads and unpacks per token: a 4-bit weight
is an eighth of its float32 copy. :class:`QuantWeight` holds one ``[N, K]`` weight of a GGUF file in
the kernel's form (4-bit types keep their nibbles, 5- to 8-bit ones widen to int8, a float32 scale and
offset per group: unpacking costs a widen, an integer add and one fma per eight weights);
:class:`QuantMatmul` is a fused matmul of such parts (QKV whose V has another type than Q and K).

Invariants:
- ``dequantize()`` gives the float32 weights of gguf-py's ``dequantize`` bit for bit (tests compare; a
  zero may be +0 where gguf-py has -0), so a product differs from the dequantized model's only in
  summation order.
- :func:`quant_matmul` unpacks each weight once per eight rows of ``x``, in registers; it is correct for
  any row count, and faster than the float32 panels only up to about a dozen rows.
- Only the types in ``GGML_BLOCKS`` are served natively; others stay with the float32 path (the loader
  decides, per matmul).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

# GGML type id -> (name, weights per block, bytes per block): the types quant_linear.cpp implements.
GGML_BLOCKS: dict[int, tuple[str, int, int]] = {
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144), 14: ("Q6_K", 256, 210),
}


@dataclass(frozen=True)
class QuantWeight:
    """One ``[N, K]`` weight in the kernel's form (``csrc/quant_linear.cpp``): ``q`` (uint8 nibbles
    ``[N, K / 2]`` or int8 ``[N, K]``), float32 ``scales`` and ``offsets`` per group of weights (offsets
    empty when all are 0); weight = fma(q, scale, offset). ``qtype`` is the GGML type it came from."""

    q: torch.Tensor
    scales: torch.Tensor
    offsets: torch.Tensor
    qtype: int
    in_features: int

    @classmethod
    def from_gguf(cls, raw: torch.Tensor, qtype: int, in_features: int) -> QuantWeight:
        """The weight whose GGUF blocks are ``raw`` (uint8 ``[N, row_bytes]``, GGML type ``qtype``)."""
        if qtype not in GGML_BLOCKS:
            raise ValueError(f"GGML type {qtype} is not served natively (types: {sorted(GGML_BLOCKS)})")
        name, block, nbytes = GGML_BLOCKS[qtype]
        if raw.dtype != torch.uint8 or raw.dim() != 2:
            raise ValueError("GGUF blocks are a uint8 [N, row_bytes] tensor")
        if in_features <= 0 or in_features % block or raw.shape[1] != in_features // block * nbytes:
            raise ValueError(f"{name} rows of {raw.shape[1]} bytes do not hold {in_features} weights in blocks of {block}")
        q, scales, offsets = torch.ops.agent_engine.quant_repack(raw.contiguous(), qtype, in_features)
        return cls(q, scales, offsets, qtype, in_features)

    @property
    def type_name(self) -> str:
        return GGML_BLOCKS[self.qtype][0]

    @property
    def out_features(self) -> int:
        return int(self.q.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes a pass over the weight reads."""
        return sum(t.numel() * t.element_size() for t in (self.q, self.scales, self.offsets))

    def dequantize(self) -> torch.Tensor:
        """The float32 ``[N, K]`` weights (gguf-py's values, bit for bit but for the sign of a zero)."""
        out = torch.empty(self.out_features, self.in_features, dtype=torch.float32)
        torch.ops.agent_engine.quant_dequantize(out, self.q, self.scales, self.offsets)
        return out

    def rows(self, index: torch.Tensor) -> QuantWeight:
        """The weight with its output features reordered: row ``i`` of the result is row ``index[i]``."""
        offsets = self.offsets if self.offsets.numel() == 0 else self.offsets.index_select(0, index)
        return QuantWeight(self.q.index_select(0, index), self.scales.index_select(0, index), offsets,
                           self.qtype, self.in_features)

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """``x [M, K] @ W^T`` by ``quant_linear`` (any M; see :func:`quant_matmul` for the choice)."""
        out = x.new_empty(x.shape[0], self.out_features)
        torch.ops.agent_engine.quant_linear(out, x, self.q, self.scales, self.offsets)
        return out

    def cat(self, other: QuantWeight) -> QuantWeight:
        """This weight's output features, then ``other``'s (same type and width)."""
        if other.qtype != self.qtype or other.in_features != self.in_features:
            raise ValueError("only weights of one type and width concatenate")
        offsets = self.offsets if self.offsets.numel() == 0 and other.offsets.numel() == 0 else \
            torch.cat([self._dense_offsets(), other._dense_offsets()])
        return QuantWeight(torch.cat([self.q, other.q]), torch.cat([self.scales, other.scales]), offsets,
                           self.qtype, self.in_features)

    def _dense_offsets(self) -> torch.Tensor:
        return self.offsets if self.offsets.numel() else torch.zeros_like(self.scales)


@dataclass(frozen=True)
class QuantMatmul:
    """A matmul whose output features are the concatenation of ``parts`` (each one GGML type)."""

    parts: tuple[QuantWeight, ...]

    @classmethod
    def of(cls, parts: Sequence[QuantWeight]) -> QuantMatmul:
        """Parts of one type and width are merged into one (one kernel call per step)."""
        if not parts or len({p.in_features for p in parts}) != 1:
            raise ValueError("a fused quantized matmul needs parts of one input width")
        merged: list[QuantWeight] = []
        for p in parts:
            if merged and merged[-1].qtype == p.qtype:
                merged[-1] = merged[-1].cat(p)
            else:
                merged.append(p)
        return cls(tuple(merged))

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def dequantize(self) -> torch.Tensor:
        return torch.cat([p.dequantize() for p in self.parts])


def quant_matmul(x: torch.Tensor, weight: QuantMatmul, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight.dequantize(), bias)`` for a contiguous float32 ``[M, K]`` ``x`` on CPU, by
    ``quant_linear`` (callers send only the few rows where it beats float32: see the lean decoder)."""
    outs = [part.linear(x) for part in weight.parts]
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)
    return out if bias is None else out.add_(bias)
