"""A lean decoder's matmul weights per layer, and the working copies its CPU kernels multiply by.

A float32 or bfloat16 weight keeps its plain tensor (the transformers modules and the fallbacks use
it) and may get two working copies, each made once from it after loading:

- column panels (``kernels.prepack``; a gate/up weight's interleaved so that the product and its
  SiLU run as one kernel) when memory allows, and always for bfloat16 weights under float32
  activations (the panels are their working copy);
- oneDNN's blocked layout (``kernels.linear_routes.onednn_weight``; AMX's tile layout where the tiles
  are granted) for a weight whose route, measured on this CPU once the panels exist, leaves the
  panels for oneDNN from a row count a step can reach: oneDNN's matmul on the plain weight would
  copy it into that layout on every call. These copies, too, are made only where memory allows
  (``prepack.prepack_allowed``, asked again after the panels).

Invariants:
- A weight has a oneDNN copy only if it has panels and ``linear_routes.takes_onednn`` holds for it (as
  it runs: a gate/up weight with interleaved panels with its SiLU) from at most ``max_rows`` rows
  (the widest step the engine may run, when known); the copy's products are
  the plain weight's up to float32 summation order, so it changes speed only.
- Copies are never updated: make them after loading, before serving, and never of weights that change.
- A layer served from quantized blocks (``quant``) has no float32 or bfloat16 matmul weights and no
  copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kernels import linear_routes
from kernels.linear_routes import WEIGHT_DTYPES, MatmulShape, onednn_from, onednn_weight, takes_onednn
from kernels.prepack import pack_gate_up, pack_weight, prepack_allowed
from kernels.quant import QuantMatmul

LAYER_MATMULS = ("qkv_w", "o_w", "gate_up_w", "down_w")
GATE_UP_SILU = "gate_up_silu"  # a layer's packed key for its gate/up panels interleaved (prepack.pack_gate_up)


@dataclass
class LayerWeights:
    """One decoder layer's norms, fused QKV bias and matmul weights (float32 or bfloat16; None where
    ``quant`` has the matmul), with their working copies by weight name."""

    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv_w: torch.Tensor | None
    qkv_b: torch.Tensor | None
    o_w: torch.Tensor | None
    gate_up_w: torch.Tensor | None
    down_w: torch.Tensor | None
    eps1: float
    eps2: float
    packed: dict[str, torch.Tensor] = field(default_factory=dict)  # panel-packed copies (GATE_UP_SILU: interleaved)
    blocked: dict[str, torch.Tensor] = field(default_factory=dict)  # oneDNN-layout copies
    quant: dict[str, QuantMatmul] = field(default_factory=dict)  # quantized blocks by weight name

    def gated(self, name: str) -> bool:
        """Whether matmul ``name`` runs with its SiLU (a gate/up weight with interleaved panels)."""
        return name == "gate_up_w" and GATE_UP_SILU in self.packed

    def dense(self) -> list[tuple[str, torch.Tensor]]:
        """The layer's float32 and bfloat16 matmul weights by name."""
        return [(name, w) for name in LAYER_MATMULS
                if (w := getattr(self, name)) is not None and w.dtype in WEIGHT_DTYPES.values()]


@dataclass(frozen=True)
class HeadCopies:
    """The LM head's working copies: its panels, and oneDNN's layout where its route takes oneDNN."""

    packed: torch.Tensor | None = None
    blocked: torch.Tensor | None = None


def make_working_copies(layers: list[LayerWeights], head: torch.Tensor | None, intermediate: int,
                        act_dtype: torch.dtype, max_rows: int | None = None) -> HeadCopies:
    """Pack every layer's matmul weights and the LM head ``head`` in panels when memory allows (always
    where the weights' dtype is not ``act_dtype``), measure each shape's route on this CPU (cached per
    CPU), then lay out in oneDNN's format the weights whose route takes oneDNN from at most
    ``max_rows`` rows (any, if None) where memory allows: the layers' copies go into their dicts, the
    head's are returned (none where nothing was packed)."""
    weights = [w for layer in layers for _, w in layer.dense()] + ([] if head is None else [head])
    widened = head is not None and head.dtype != act_dtype
    if not widened and not prepack_allowed(sum(w.numel() * w.element_size() for w in weights)):
        return HeadCopies()
    for layer in layers:
        _pack_layer(layer, intermediate)
    head_packed = pack_weight(head) if head is not None else None
    linear_routes.prepare(routed_shapes(layers, head))
    wanted = [(layer, name, w) for layer in layers for name, w in layer.dense()
              if _packed(layer, name) and _reaches_onednn(w, layer.gated(name), max_rows)]
    head_wanted = head_packed is not None and head is not None and _routed_head(head) and \
        _reaches_onednn(head, False, max_rows, logits=True)
    copy_bytes = sum(w.numel() * w.element_size() for _, _, w in wanted) + \
        (head.numel() * head.element_size() if head_wanted and head is not None else 0)
    if copy_bytes and not prepack_allowed(copy_bytes, "in oneDNN's layout"):
        return HeadCopies(head_packed)
    for layer, name, w in wanted:
        layer.blocked[name] = onednn_weight(w)
    return HeadCopies(head_packed, onednn_weight(head) if head_wanted and head is not None else None)


def routed_shapes(layers: list[LayerWeights], head: torch.Tensor | None) -> list[MatmulShape]:
    """The float32 and bfloat16 matmul shapes whose route (panels, oneDNN or AMX tiles) is measured: every
    layer weight (a gate/up weight with interleaved panels as it runs, with its SiLU) and the LM head as
    one (``logits``: its products keep float32 sums, so a bfloat16 head has no oneDNN route, whose
    product is rounded to bfloat16; the tiles keep float32 sums)."""
    shapes = [MatmulShape.of(w, gated=layer.gated(name)) for layer in layers for name, w in layer.dense()]
    if head is not None and _routed_head(head):
        shapes.append(MatmulShape.of(head, logits=True))
    return shapes


def _pack_layer(layer: LayerWeights, intermediate: int) -> None:
    """The layer's panels: a gate/up weight's interleaved where its shape allows, the others plain."""
    for name, weight in layer.dense():
        if name == "gate_up_w":
            interleaved = pack_gate_up(weight, intermediate)
            if interleaved is not None:  # gate/up and the activation in one kernel
                layer.packed[GATE_UP_SILU] = interleaved
                continue
        packed = pack_weight(weight)
        if packed is not None:
            layer.packed[name] = packed


def _packed(layer: LayerWeights, name: str) -> bool:
    """Whether matmul ``name`` of ``layer`` has panels (interleaved for a gated gate/up)."""
    return (GATE_UP_SILU if layer.gated(name) else name) in layer.packed


def _reaches_onednn(weight: torch.Tensor, gated: bool, max_rows: int | None, logits: bool = False) -> bool:
    """Whether some step of at most ``max_rows`` rows (any, if None) multiplies by ``weight`` (an LM head
    where ``logits``) through oneDNN (``linear_routes.takes_onednn``, from a row count within reach)."""
    return takes_onednn(weight, gated, logits) and (
        max_rows is None or onednn_from(*weight.shape, weight.dtype, gated, logits) <= max_rows)


def _routed_head(head: torch.Tensor) -> bool:
    """Whether the LM head's route is measured: a float32 or bfloat16 head."""
    return head.dtype in WEIGHT_DTYPES.values()
