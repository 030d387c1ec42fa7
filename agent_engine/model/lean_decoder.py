"""A lean decoder forward for Llama-family checkpoints (Llama, Mistral, Qwen2) on CPU.

It runs the same math as transformers' modules on the same weights, without their per-layer Python
machinery, and with the projections fused: one QKV matmul and one gate/up matmul per layer. Per layer:
``rms_norm(+residual) -> QKV -> rotary + KV write -> paged attention -> o_proj -> rms_norm(+residual)
-> gate/up -> silu*up -> down``; the fused elementwise ops are ``kernels.cpu_ops`` (C++ when built).

Invariants:
- The fused weights are the model's own storage: each ``q/k/v_proj`` and ``gate/up_proj`` weight is
  re-pointed to a view of the fused tensor, so memory is not doubled and the HF modules (used by
  tests and as the fallback path) keep computing the same function.
- :meth:`LeanDecoder.build` returns None (the runner then uses the HF modules with our attention) for
  anything it does not reproduce exactly: another architecture, an activation other than SiLU, MLP or
  o_proj biases, per-head norms, a non-CPU device.
- With the C++ kernels on, every matmul weight (LM head included) also gets a copy packed in column
  panels (``kernels.prepack``) when memory allows, and every step multiplies by that copy; the fused
  gate/up weight's panels are interleaved (``pack_gate_up``, an intermediate size that is a multiple of
  16) so that gate/up and the SiLU run as one kernel (``kernels.cpu_ops.gate_up_silu``); a weight
  whose measured route takes oneDNN from some row count also gets oneDNN's layout of it
  (``model.decoder_weights``), which those steps multiply by.
- Built with :class:`QuantizedWeights` (a GGUF served from its file: ``model.gguf_native``), every
  matmul (LM head included) multiplies by its quantized blocks (``kernels.quant``) at any row count,
  prefill included (by the route measured faster on this CPU for the shape and row count:
  ``kernels.quant_routes``, calibrated when the decoder is built), and token embeddings are rows of the quantized embedding, dequantized per step:
  there are no float32 matmul or embedding weights at all (the model's are on the ``meta`` device),
  only float32 norms and biases. Such a decoder needs the CPU and the C++ kernels.
- Rotary cos/sin come from the model's own ``rotary_emb`` (any rope scaling type); for the static types
  a table over positions is computed once and grown on demand.
- A bfloat16 model with the C++ kernels runs float32 activations over its bfloat16 weights
  (:meth:`LeanDecoder.activation_dtype`): every matmul weight is packed in bfloat16 panels whatever the
  memory (they are its working copy), norms and biases get float32 copies, and the KV cache is
  bfloat16, the model's dtype (float32 on request: :meth:`kv_cache_dtype`). Where the kernels have no
  bfloat16 products, ``panel_linear`` widens the weights exactly, and with a float32 KV cache the
  outputs are those of the float32 model whose weights are the bfloat16 values, up to summation order;
  where they have them (AVX512_BF16), the panels are K pairs and each matmul also rounds its input to
  bfloat16 (``kernels.prepack``), and attention over a bfloat16 cache multiplies in bfloat16 too
  (``kernels.paged_attention``). From
  the row count where oneDNN's bfloat16 matmul measured faster for a layer's weight
  (``kernels.linear_routes``; AMX tiles where granted) that matmul's output is rounded to bfloat16
  too. A bfloat16 LM head never takes that route, nor the oneDNN form of a GGUF head
  (``kernels.quant_routes``): logits keep float32 sums (AMX tiles, which keep them, are a route of both).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from agent_engine.config import KV_CACHE_DTYPES
from agent_engine.model.decoder_weights import (
    GATE_UP_SILU,
    LAYER_MATMULS,
    HeadCopies,
    LayerWeights,
    make_working_copies,
)
from kernels import AttentionMetadata, AttentionWorkspace, paged_attention, quant_routes
from kernels.cpu_ops import gate_up_silu, linear, rms_norm, rotary_and_cache, silu_and_mul, use_cpp
from kernels.layer_stack import LayerStack, StackBuffers, StackLayer, StackMatmul
from kernels.paged_attention import cpp_requests
from kernels.quant import QuantMatmul, quant_matmul

logger = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
_STATIC_ROPE = ("default", "linear", "llama3", "yarn")


@dataclass(frozen=True)
class QuantizedWeights:
    """Every matmul of a decoder in quantized blocks: per layer one ``QuantMatmul`` for each name of
    ``LAYER_MATMULS`` (output features in the fused order: q, k, v; gate, up), the LM head, and the
    token embedding (``[vocab, hidden]``, one part; the head may be the same object when tied).
    ``in_huge_pages``: the blocks were copied into memory the system agreed to back with huge pages."""

    layers: tuple[dict[str, QuantMatmul], ...]
    head: QuantMatmul
    embedding: QuantMatmul
    in_huge_pages: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes of quantized weights (a tied head counted once)."""
        matmuls = {id(m): m for m in (self.head, self.embedding, *(m for layer in self.layers for m in layer.values()))}
        return sum(m.nbytes for m in matmuls.values())


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s real parameters: its first one not on ``meta`` (a model served from
    quantized weights keeps its matmul weights there), else CPU."""
    return next((p.device for p in model.parameters() if p.device.type != "meta"), torch.device("cpu"))


def unsupported_reason(model: torch.nn.Module) -> str | None:
    """Why this decoder cannot run ``model`` (a short phrase), or None when it can."""
    config = model.config
    if getattr(config, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return f"model type {getattr(config, 'model_type', None)!r}"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r}"
    if model_device(model).type != "cpu":
        return "not on CPU"
    for layer in model.get_decoder().layers:
        attn, mlp = layer.self_attn, layer.mlp
        if attn.o_proj.bias is not None or any(getattr(mlp, n).bias is not None for n in
                                               ("gate_proj", "up_proj", "down_proj")):
            return "o_proj or MLP biases"
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            return "per-head q/k norms"
        if (attn.q_proj.bias is None) != (attn.k_proj.bias is None) or \
                (attn.k_proj.bias is None) != (attn.v_proj.bias is None):
            return "partial QKV biases"
    return None


def _fuse(modules: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate the weights (and biases) along the output dim; re-point each module at its view."""
    with torch.no_grad():
        weight = torch.cat([m.weight for m in modules]).contiguous()
        bias = None if modules[0].bias is None else torch.cat([m.bias for m in modules]).contiguous()
        row = 0
        for m in modules:
            n = m.weight.shape[0]
            m.weight.data = weight[row : row + n]
            if bias is not None:
                m.bias.data = bias[row : row + n]
            row += n
    return weight, bias


class LeanDecoder:
    """Use :meth:`build`; then :meth:`forward` per step."""

    def __init__(self, model: torch.nn.Module, quantized: QuantizedWeights | None = None,
                 max_step_rows: int | None = None) -> None:
        self.act_dtype = self.activation_dtype(model)
        self.device = model_device(model)
        decoder = model.get_decoder()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        attn0 = decoder.layers[0].self_attn
        self.num_q_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_q_heads
        self.head_dim = attn0.head_dim
        self.scale = float(attn0.scaling)
        self.embed: torch.Tensor | None = None if quantized else decoder.embed_tokens.weight
        self.embed_quant = quantized.embedding if quantized else None
        self.norm_w, self.norm_eps = self._act(decoder.norm.weight), float(decoder.norm.variance_epsilon)
        self.rotary = decoder.rotary_emb
        self.static_rope = getattr(self.rotary, "rope_type", "default") in _STATIC_ROPE
        self._cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None
        self.sliding_window = self._min_window(model, decoder)
        quant_layers = quantized.layers if quantized else tuple({} for _ in decoder.layers)
        self.layers = [self._layer(layer, self._act, quant) for layer, quant in zip(decoder.layers, quant_layers,
                                                                                   strict=True)]
        self.hidden = int(config.hidden_size)
        self.qkv_width = (self.num_q_heads + 2 * self.num_kv_heads) * self.head_dim
        self.intermediate = int(decoder.layers[0].mlp.down_proj.weight.shape[1])
        head = model.get_output_embeddings()
        self.head_w: torch.Tensor | None = None if quantized else head.weight
        self.head_b = self._act(getattr(head, "bias", None))
        self.head_quant = quantized.head if quantized else None
        self.head_copies = HeadCopies()
        self.cpp = use_cpp(self.device)
        if quantized is not None and (not self.cpp or self.act_dtype != torch.float32):
            raise ValueError("quantized weights need the C++ CPU kernels and float32 activations")
        if self.cpp and quantized is None:
            self.head_copies = make_working_copies(self.layers, self.head_w, self.intermediate, self.act_dtype,
                                                   max_step_rows)
        if quantized is not None:
            quant_routes.prepare((m.shape, m.raws) for layer in self.layers for m in layer.quant.values())
            if self.head_quant is not None:  # logits keep float32 sums: no oneDNN form for the head
                quant_routes.prepare([(self.head_quant.shape, self.head_quant.raws)], onednn=False)
        self.stack = self._layer_stack() if self.cpp and self.act_dtype == torch.float32 else None

    @staticmethod
    def activation_dtype(model: torch.nn.Module) -> torch.dtype:
        """The dtype of the lean decoder's activations for ``model``: float32 for a bfloat16 CPU model
        that it supports with the C++ kernels loaded, else the model's dtype (its KV cache's:
        :meth:`kv_cache_dtype`)."""
        dtype = next(model.parameters()).dtype
        if dtype == torch.bfloat16 and unsupported_reason(model) is None and use_cpp(torch.device("cpu")):
            return torch.float32
        return dtype

    @staticmethod
    def kv_cache_dtype(model: torch.nn.Module, requested: str = "auto") -> torch.dtype:
        """The KV cache dtype for ``model``: ``auto`` is the model's own dtype wherever the cache can
        hold it (a bfloat16 model's K and V in bfloat16 here too, as in vLLM and transformers: half the
        bytes of a float32 cache), else its activations'; ``float32`` needs float32 activations;
        ``bfloat16`` needs float32 activations in this decoder with the C++ kernels (which read a
        bfloat16 cache); anything else is a ValueError."""
        if requested not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {requested!r}")
        act = LeanDecoder.activation_dtype(model)
        if requested == "auto":
            reads_bf16 = act == torch.float32 and next(model.parameters()).dtype == torch.bfloat16
            return torch.bfloat16 if reads_bf16 else act
        if requested == "float32":
            if act != torch.float32:
                raise ValueError(f"a float32 KV cache needs float32 activations; this model runs {act}")
            return torch.float32
        if act != torch.float32 or unsupported_reason(model) is not None or not use_cpp(torch.device("cpu")):
            raise ValueError("a bfloat16 KV cache needs the lean CPU decoder with the C++ kernels and float32 "
                             "activations (a float32 or bfloat16 Llama-family model on CPU)")
        return torch.bfloat16

    def _act(self, tensor: torch.Tensor | None) -> torch.Tensor | None:
        """``tensor`` in the activation dtype (a float32 copy of a bfloat16 norm weight or bias)."""
        return None if tensor is None else tensor.to(self.act_dtype)

    def _matmul(self, layer: LayerWeights, name: str, x: torch.Tensor, bias: torch.Tensor | None = None,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """``x @ W^T (+ bias)`` for the layer's weight ``name``: its quantized blocks, else float32 (into
        ``out`` when the kernel can write there)."""
        quant = layer.quant.get(name)
        if quant is not None:
            return quant_matmul(x, quant, bias, out=out)
        return linear(x, getattr(layer, name), bias, self.cpp, layer.packed.get(name), out, layer.blocked.get(name))

    def _mlp_activation(self, layer: LayerWeights, h: torch.Tensor,
                        buf: Callable[[str, int], torch.Tensor | None]) -> torch.Tensor:
        """``silu(h @ gate^T) * (h @ up^T)``: in one kernel on the interleaved gate/up panels where the
        layer has them, else the gate/up matmul then ``silu_and_mul``."""
        interleaved = layer.packed.get(GATE_UP_SILU)
        if interleaved is not None and layer.gate_up_w is not None and h.is_contiguous():
            return gate_up_silu(h, layer.gate_up_w, interleaved, out=buf("act", self.intermediate),
                                blocked=layer.blocked.get("gate_up_w"))
        gate_up = self._matmul(layer, "gate_up_w", h, out=buf("gate_up", 2 * self.intermediate))
        return silu_and_mul(gate_up, self.cpp, buf("act", self.intermediate))

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The token embeddings ``[T, H]`` in the activation dtype."""
        if self.embed_quant is not None:
            return self.embed_quant.embedding(input_ids)
        assert self.embed is not None
        return F.embedding(input_ids, self.embed).to(self.act_dtype)

    @classmethod
    def build(cls, model: torch.nn.Module, quantized: QuantizedWeights | None = None,
              max_step_rows: int | None = None) -> LeanDecoder | None:
        """The lean decoder of ``model``, or None (with the reason logged) when it is not supported;
        with ``quantized`` weights (which only this decoder runs) ValueError instead of None.
        ``max_step_rows``: the widest step it will run, when known (no weight copies for wider ones)."""
        reason = unsupported_reason(model)
        if reason is not None:
            if quantized is not None:
                raise ValueError(f"a model served from quantized weights needs the lean decoder, which is off: {reason}")
            logger.info("lean decoder off (%s): using the transformers modules", reason)
            return None
        return cls(model, quantized, max_step_rows)

    @staticmethod
    def _min_window(model: torch.nn.Module, decoder: Any) -> int | None:
        windows = [getattr(layer.self_attn, "sliding_window", None) for layer in decoder.layers]
        if model.config.model_type == "mistral":
            windows.append(getattr(model.config, "sliding_window", None))
        return min((w for w in windows if w), default=None)

    @staticmethod
    def _layer(layer: Any, act: Callable[[torch.Tensor | None], torch.Tensor | None],
               quant: dict[str, QuantMatmul]) -> LayerWeights:
        """The layer's weights: the modules' own (q/k/v and gate/up fused), or with ``quant`` (every
        matmul) only its norms and the fused QKV bias."""
        attn, mlp = layer.self_attn, layer.mlp
        norms = act(layer.input_layernorm.weight), act(layer.post_attention_layernorm.weight)
        eps = float(layer.input_layernorm.variance_epsilon), float(layer.post_attention_layernorm.variance_epsilon)
        if quant:
            if set(quant) != set(LAYER_MATMULS):
                raise ValueError(f"quantized layer matmuls {sorted(quant)}, expected {sorted(LAYER_MATMULS)}")
            biases = [m.bias for m in (attn.q_proj, attn.k_proj, attn.v_proj)]
            qkv_b = None if biases[0] is None else torch.cat(biases).contiguous()
            return LayerWeights(norms[0], norms[1], None, act(qkv_b), None, None, None, eps[0], eps[1], quant=dict(quant))
        qkv_w, qkv_b = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
        gate_up_w, _ = _fuse([mlp.gate_proj, mlp.up_proj])
        return LayerWeights(norms[0], norms[1], qkv_w, act(qkv_b), attn.o_proj.weight, gate_up_w, mlp.down_proj.weight,
                      eps[0], eps[1])

    def _rotary(self, positions: torch.Tensor, max_pos: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin ``[T, D]`` in the activation dtype for ``positions``."""
        like = torch.empty(1, dtype=self.act_dtype, device=self.device)  # the rotary reads only its dtype and device
        if not self.static_rope:
            cos, sin = self.rotary(like, positions.view(1, -1))
            return cos[0].contiguous(), sin[0].contiguous()
        if self._cos_sin is None or self._cos_sin[0].shape[0] <= max_pos:
            n = max(1024, 2 * (max_pos + 1))
            cos, sin = self.rotary(like, torch.arange(n, device=positions.device).view(1, -1))
            self._cos_sin = (cos[0].contiguous(), sin[0].contiguous())
        cos_t, sin_t = self._cos_sin
        return cos_t.index_select(0, positions), sin_t.index_select(0, positions)

    def forward(self, input_ids: torch.Tensor, metadata: AttentionMetadata,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]], rows: torch.Tensor) -> torch.Tensor:
        """Final-normed hidden states ``[len(rows), H]`` at query rows ``rows`` of the packed batch."""
        if self.sliding_window is not None and metadata.max_seq_len > self.sliding_window:
            raise NotImplementedError(f"sliding window {self.sliding_window} shorter than a sequence "
                                      f"({metadata.max_seq_len}) is not supported")
        cos, sin = self._rotary(metadata.positions, metadata.max_seq_len)
        residual = self._embed(input_ids)
        buf = self._buffers(metadata, residual.shape[0])
        stacked = self._stacked(residual, buf, cos, sin, kv_caches, metadata)
        delta = stacked.delta if stacked is not None else self._layer_loop(residual, buf, cos, sin, kv_caches,
                                                                            metadata)
        if rows.numel() != residual.shape[0]:
            residual, delta = residual.index_select(0, rows), delta.index_select(0, rows)
        return rms_norm(delta, self.norm_w, self.norm_eps, residual, self.cpp)

    def _layer_loop(self, residual: torch.Tensor, buf: Callable[[str, int], torch.Tensor | None], cos: torch.Tensor,
                    sin: torch.Tensor, kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                    metadata: AttentionMetadata) -> torch.Tensor:
        """Every layer, kernel by kernel from Python: ``residual`` becomes the last layer's residual;
        returns the last layer's output (``delta``)."""
        delta: torch.Tensor | None = None
        for layer, (k_cache, v_cache) in zip(self.layers, kv_caches, strict=True):
            h = rms_norm(residual if delta is None else delta, layer.ln1, layer.eps1,
                         None if delta is None else residual, self.cpp, buf("h", self.hidden))
            attn = self._attention(layer, h, cos, sin, k_cache, v_cache, metadata, buf("qkv", self.qkv_width))
            delta = self._matmul(layer, "o_w", attn, out=buf("delta", self.hidden))
            h = rms_norm(delta, layer.ln2, layer.eps2, residual, self.cpp, buf("h", self.hidden))
            act = self._mlp_activation(layer, h, buf)
            delta = self._matmul(layer, "down_w", act, out=buf("delta", self.hidden))
        assert delta is not None
        return delta

    def _layer_stack(self) -> LayerStack | None:
        """Every layer's matmuls, norms and QKV bias as one :class:`LayerStack` (None where a matmul
        has neither quantized blocks nor panels)."""
        def matmul(layer: LayerWeights, name: str) -> StackMatmul | None:
            quant = layer.quant.get(name)
            if quant is not None:
                return StackMatmul(quant=quant)
            interleaved = layer.packed.get(GATE_UP_SILU) if name == "gate_up_w" else None
            if interleaved is not None:
                return StackMatmul(weight=layer.gate_up_w, panels=interleaved, silu=True)
            packed = layer.packed.get(name)
            return None if packed is None else StackMatmul(weight=getattr(layer, name), panels=packed)

        stack_layers = []
        for layer in self.layers:
            qkv, o, gate_up, down = (matmul(layer, name) for name in LAYER_MATMULS)
            if qkv is None or o is None or gate_up is None or down is None:
                return None
            stack_layers.append(StackLayer(layer.ln1, layer.ln2, layer.eps1, layer.eps2, layer.qkv_b,
                                           (qkv, o, gate_up, down)))
        return LayerStack.build(stack_layers)

    def _stacked(self, residual: torch.Tensor, buf: Callable[[str, int], torch.Tensor | None], cos: torch.Tensor,
                 sin: torch.Tensor, kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                 metadata: AttentionMetadata) -> StackBuffers | None:
        """Every layer in one C++ call (``kernels.layer_stack``) where the step allows it, with the
        buffers it ran in; None (nothing run) where it does not: then the layer loop runs."""
        if self.stack is None or not self.cpp:
            return None
        tokens, k_cache = residual.shape[0], kv_caches[0][0]
        plan = self.stack.plan(tokens)
        if plan is None:
            return None
        attn = buf("attn", self.num_q_heads * self.head_dim)
        if attn is None:
            attn = residual.new_empty(tokens, self.num_q_heads * self.head_dim)
        requests = cpp_requests(attn.view(tokens, self.num_q_heads, self.head_dim), k_cache, metadata)
        if requests is None:
            return None

        def buffer(role: str, width: int) -> torch.Tensor:
            out = buf(role, width)
            return residual.new_empty(tokens, width) if out is None else out

        gate_up = buffer("gate_up", 2 * self.intermediate) if self.stack.needs_gate_up else residual.new_empty(0)
        buffers = StackBuffers(residual, buffer("delta", self.hidden), buffer("h", self.hidden),
                               buffer("qkv", self.qkv_width), attn, gate_up, buffer("act", self.intermediate))
        self.stack.run(plan, buffers, cos, sin, kv_caches, metadata, requests, self.scale, self.num_q_heads,
                       self.num_kv_heads)
        return buffers

    def _buffers(self, metadata: AttentionMetadata, tokens: int) -> Callable[[str, int], torch.Tensor | None]:
        """``(role, width) -> [tokens, width]`` activation buffer of this step, one per role, reused by
        every layer and grown only by a longer step (the step's ``AttentionWorkspace``), or None without
        one. A role's buffer is rewritten only after its last reader in the layer has run: ``h`` (a
        norm's output) feeds one matmul, ``delta`` (a matmul's output) one norm; the final norm's
        output, which the caller keeps, is always a fresh tensor."""
        workspace = metadata.workspace
        if workspace is None or not self.cpp:
            return lambda role, width: None
        return lambda role, width: workspace.get(f"lean_{role}", (tokens, width), self.act_dtype, self.device)

    def _attention(self, layer: LayerWeights, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, metadata: AttentionMetadata,
                   qkv_out: torch.Tensor | None = None) -> torch.Tensor:
        """QKV, rotary, KV write and paged attention: ``[T, Hq * D]``."""
        hq, hk, d = self.num_q_heads, self.num_kv_heads, self.head_dim
        qkv = self._matmul(layer, "qkv_w", h, layer.qkv_b, qkv_out)
        rotary_and_cache(qkv, cos, sin, k_cache, v_cache, metadata.slot_mapping, hq, hk, self.cpp)
        tokens = qkv.shape[0]
        heads = qkv.view(tokens, hq + 2 * hk, d)
        q, k, v = heads[:, :hq], heads[:, hq : hq + hk], heads[:, hq + hk :]
        return paged_attention(q, k, v, k_cache, v_cache, metadata, self.scale).reshape(tokens, hq * d)

    def logits(self, hidden: torch.Tensor, workspace: AttentionWorkspace | None = None) -> torch.Tensor:
        """The LM head on final-normed ``hidden`` ``[R, H]``: ``[R, V]`` in the activation dtype. With a
        ``workspace`` the panel or quantized kernel writes into its ``lean_logits`` buffer (tens of megabytes a step
        at a large vocabulary, page-faulted afresh on every step otherwise): the result is then valid
        only until the next step's logits."""
        out = None
        if workspace is not None and (self.head_copies.packed is not None or self.head_quant is not None):
            out = workspace.get("lean_logits", (hidden.shape[0], self.vocab_rows), self.act_dtype, hidden.device)
        if self.head_quant is not None:
            return quant_matmul(hidden.contiguous(), self.head_quant, self.head_b, out=out)
        assert self.head_w is not None
        return linear(hidden, self.head_w, self.head_b, self.cpp, self.head_copies.packed, out, self.head_copies.blocked,
                      logits=True)

    @property
    def vocab_rows(self) -> int:
        """Rows of the LM head (the logits' width)."""
        if self.head_quant is not None:
            return self.head_quant.out_features
        assert self.head_w is not None
        return int(self.head_w.shape[0])
