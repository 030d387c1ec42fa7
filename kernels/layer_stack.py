"""A step's decoder layers in one C++ call (``decoder_layers``, ``kernels/csrc/decoder_layers.cpp``).

The lean decoder's layer loop calls about nine kernels a layer from Python. At a decode row of a GGUF
model each kernel streams its weights from memory in tens of microseconds and is wrapped in a few
microseconds of interpreter and dispatcher, during which the memory stands idle: a tenth of a 1.5B
model's one-stream step (docs/performance.md). :class:`LayerStack` flattens a decoder's per-layer
weights once; per step it picks every matmul's route for the step's row count (the same choice the
loop's ``quant_matmul`` / ``linear`` / ``gate_up_silu`` make) and hands the whole stack to one call.

Invariants:
- The op runs exactly the kernels the loop would, in the same order: its results are the loop's bit
  for bit (the tests compare them).
- :meth:`LayerStack.plan` is None for a row count at which some matmul takes a route the op does not
  run (a float32 or bfloat16 weight that oneDNN takes, a GGUF weight in the wide route's oneDNN form);
  the caller then runs the loop, as it does when
  :func:`kernels.paged_attention.cpp_requests` says the step's attention is not all C++.
- A stack is all or nothing: the lean decoder builds one only where every matmul of every layer has
  quantized blocks or panels, so the loop stays the one path for everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import torch

from kernels.attention_metadata import AttentionMetadata
from kernels.cpp_build import ops
from kernels.linear_routes import LinearForm, linear_form
from kernels.quant import QuantForm, QuantMatmul, quant_form

GATE_UP = 2  # the gate/up matmul's index in a layer's four (QKV, O, gate/up, down)


class Route(IntEnum):
    """A matmul's kernel in the op's plan (the C++ ``Route``)."""

    INT8 = 0  # gguf_linear_int8
    WIDE_F32 = 1  # gguf_linear_wide
    WIDE_BF16 = 2  # gguf_linear_wide in bfloat16 products
    PANELS = 3  # panel_linear
    PANELS_SILU = 4  # panel_linear_silu on interleaved gate/up panels: writes the activation
    WIDE_TILES = 5  # gguf_linear_tiles: AMX tiles
    PANEL_TILES = 6  # panel_linear_tiles: bfloat16 pair panels in AMX tiles
    PANEL_TILES_SILU = 7  # the same on interleaved gate/up panels with the SiLU: writes the activation


# The op's kernel for each form of a GGUF matmul (none for the oneDNN form: the loop runs that step).
_QUANT_ROUTES = {QuantForm.INT8: Route.INT8, QuantForm.WIDE_F32: Route.WIDE_F32, QuantForm.WIDE_BF16: Route.WIDE_BF16,
                 QuantForm.WIDE_TILES: Route.WIDE_TILES}


@dataclass(frozen=True)
class StackMatmul:
    """One matmul as the stack runs it: a GGUF weight's ``quant`` blocks, or ``panels`` (with the
    ``weight`` they pack, whose dtype and shape decide panels or oneDNN by row count); ``silu``:
    interleaved gate/up panels (``kernels.prepack.pack_gate_up``)."""

    quant: QuantMatmul | None = None
    weight: torch.Tensor | None = None
    panels: torch.Tensor | None = None
    silu: bool = False

    def route(self, rows: int) -> Route | None:
        """This matmul's kernel for a step of ``rows`` rows, or None where the op has none (oneDNN)."""
        if self.quant is not None:
            return _QUANT_ROUTES.get(quant_form(self.quant, rows))
        assert self.weight is not None
        form = linear_form(self.weight, rows, self.silu)
        if form is LinearForm.ONEDNN:
            return None
        if form is LinearForm.TILES:
            return Route.PANEL_TILES_SILU if self.silu else Route.PANEL_TILES
        return Route.PANELS_SILU if self.silu else Route.PANELS

    @property
    def tensors(self) -> list[torch.Tensor]:
        """What the op takes from its ``weights`` list for this matmul."""
        if self.quant is not None:
            return self.quant.raws
        assert self.panels is not None
        return [self.panels]


@dataclass(frozen=True)
class StackLayer:
    """One decoder layer's norms (with their epsilons), QKV bias and matmuls (QKV, O, gate/up, down)."""

    ln1: torch.Tensor
    ln2: torch.Tensor
    eps1: float
    eps2: float
    qkv_bias: torch.Tensor | None
    matmuls: tuple[StackMatmul, StackMatmul, StackMatmul, StackMatmul]


@dataclass(frozen=True)
class StackBuffers:
    """The step's activations, each ``[T, width]`` float32 and contiguous: ``residual`` (the
    embeddings in, the last layer's residual out), ``delta`` (the last layer's output), and the
    scratch of every layer. ``gate_up`` may be empty where every layer has SiLU panels."""

    residual: torch.Tensor
    delta: torch.Tensor
    h: torch.Tensor
    qkv: torch.Tensor
    attn: torch.Tensor
    gate_up: torch.Tensor
    act: torch.Tensor


def _kind_key(m: StackMatmul) -> tuple[object, ...]:
    """What a matmul's route depends on: its quantized shape, or its panels' kind and weight shape."""
    if m.quant is not None:
        return ("quant", m.quant.shape)
    assert m.weight is not None
    return ("panels", m.silu, m.weight.dtype, m.weight.is_contiguous(), tuple(m.weight.shape))


class LayerStack:
    """Use :meth:`build`; then per step :meth:`plan` and :meth:`run`."""

    def __init__(self, layers: Sequence[StackLayer]) -> None:
        matmuls = [m for layer in layers for m in layer.matmuls]
        self.norms = [n for layer in layers for n in (layer.ln1, layer.ln2)]
        self.eps = [e for layer in layers for e in (layer.eps1, layer.eps2)]
        self.qkv_bias = [layer.qkv_bias for layer in layers]
        self.weights = [t for m in matmuls for t in m.tensors]
        self.qtypes = [q for m in matmuls for q in (m.quant.qtypes if m.quant is not None else [-1])]
        self.counts = [len(m.tensors) for m in matmuls]
        # The route of a matmul depends only on its weight's kind and shape: one lookup per distinct one.
        kind_index: dict[tuple[object, ...], int] = {}
        self._kind_of = [kind_index.setdefault(_kind_key(m), len(kind_index)) for m in matmuls]
        self._kinds = [matmuls[self._kind_of.index(i)] for i in range(len(kind_index))]
        self.needs_gate_up = any(not layer.matmuls[GATE_UP].silu for layer in layers)
        self._plans: dict[tuple[Route | None, ...], list[int]] = {}

    @classmethod
    def build(cls, layers: Sequence[StackLayer]) -> LayerStack | None:
        """The stack of ``layers``, or None when there are none or the C++ kernels lack the op."""
        if not layers or not hasattr(ops(), "decoder_layers"):
            return None
        return cls(layers)

    def plan(self, rows: int) -> list[int] | None:
        """Two ints per matmul (its :class:`Route`, how many tensors it takes) for a step of ``rows``
        rows, or None when a matmul's route at that row count is not one the op runs."""
        routes = tuple(m.route(rows) for m in self._kinds)
        if any(r is None for r in routes):
            return None
        plan = self._plans.get(routes)
        if plan is None:
            plan = self._plans[routes] = [int(x) for kind, count in zip(self._kind_of, self.counts, strict=True)
                                          for x in (routes[kind], count)]  # type: ignore[arg-type]
        return plan

    def run(self, plan: list[int], buffers: StackBuffers, cos: torch.Tensor, sin: torch.Tensor,
            kv_caches: Sequence[tuple[torch.Tensor, torch.Tensor]], metadata: AttentionMetadata,
            requests: torch.Tensor, scale: float, num_q_heads: int, num_kv_heads: int) -> None:
        """Every layer for the step (``plan`` from :meth:`plan`, ``requests`` from
        :func:`kernels.paged_attention.cpp_requests`): on return ``buffers.residual`` and
        ``buffers.delta`` hold the last layer's residual and output."""
        b = buffers
        ops().decoder_layers(b.residual, b.delta, b.h, b.qkv, b.attn, b.gate_up, b.act, self.norms, self.eps,
                             self.qkv_bias, self.weights, self.qtypes, plan, cos, sin,
                             [k for k, _ in kv_caches], [v for _, v in kv_caches], metadata.slot_mapping,
                             metadata.block_tables, metadata.query_start_loc, metadata.seq_lens, requests, scale,
                             num_q_heads, num_kv_heads)
