"""The fused ops of a decoder step, each as the C++ kernel when loaded and as plain torch otherwise.

Both implementations share one contract per function (the tests compare them):

* :func:`rms_norm` ``(x, weight, eps, residual=None)``: with ``residual``, first ``residual += x`` in
  place, then normalise ``residual``; returns ``rms_norm(...) * weight`` (HF's ``LlamaRMSNorm``:
  float32 statistics, the normalised value cast to the dtype before the weight).
* :func:`silu_and_mul` ``(gate_up [T, 2I]) -> [T, I]``: ``silu(gate) * up``.
* :func:`linear` ``(x [T, K], weight [N, K], bias=None, packed=None) -> [T, N]``: ``F.linear``; the
  C++ ``panel_linear`` takes float32 steps on ``packed`` (the same weight in column panels, float32
  or bfloat16) below the row count from which oneDNN was measured faster for this shape and dtype on
  this CPU (``kernels.linear_routes``: for a bfloat16 weight oneDNN rounds its product to bfloat16),
  else ``small_linear`` those of at most ``SMALL_LINEAR_MAX_ROWS`` rows.
  A bfloat16 weight under a float32 ``x`` multiplies as its exact float32 values (float32 out), except
  in K-pair panels (``kernels.prepack``: where the kernels have bfloat16 products), where ``x`` is
  rounded to bfloat16 first; the torch fallback (no C++ kernels) widens the weight and keeps ``x``.
* :func:`rotary_and_cache` ``(qkv [T, (Hq + 2Hk) D], cos, sin [T, D], k_cache, v_cache, slots, Hq, Hk)``:
  rotates q and k in place (HF ``rotate_half`` convention) and writes k, v into the caches (rounded
  to a bfloat16 cache under a float32 ``qkv``, to nearest even).
* :func:`paged_attention_cpu` ``(query [T, Hq, D], k_cache, v_cache, metadata, scale, req_indices,
  out)``: attention of the listed requests' rows, read straight from the paged caches.

``use_cpp()`` says which one runs: the C++ ops on CPU tensors when ``kernels.cpp_build`` loaded them.
``rms_norm``, ``silu_and_mul`` and ``linear`` take an optional contiguous ``out`` of the result's
shape and dtype: the C++ ops write into it and return it (a caller reusing one buffer per role and
step spares the allocator fresh multi-megabyte pages on every call), the torch paths return a new
tensor; either way the caller uses the returned tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata
from kernels.cpp_build import load_cpu_ops, ops
from kernels.kv_cache import write_kv_cache
from kernels.linear_routes import ONEDNN, LinearForm, linear_form, onednn_linear


def use_cpp(device: torch.device) -> bool:
    """True when the C++ kernels serve tensors on ``device`` (CPU only; built and loaded on first call)."""
    return device.type == "cpu" and load_cpu_ops()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
             cpp: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """See the module docstring; ``x`` and ``residual`` are contiguous ``[T, H]``."""
    if cpp:
        src = residual if residual is not None else x
        out = torch.empty_like(src) if out is None else out
        ops().rms_norm(out, src, x if residual is not None else None, weight, eps)
        return out
    if residual is not None:
        residual.add_(x)
        x = residual
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


SMALL_LINEAR_MAX_ROWS = 16  # without panels: up to here the C++ small_linear is fastest (bench kernels)
ONEDNN_LINEAR_MAX_ROWS = 64  # without panels: up to here oneDNN's matmul beats MKL's


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, cpp: bool = False,
           packed: torch.Tensor | None = None, out: torch.Tensor | None = None,
           blocked: torch.Tensor | None = None, logits: bool = False) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a 2-D ``x``, by the fastest kernel on CPU float32 with ``cpp``:
    with ``packed`` (``kernels.prepack.pack_weight(weight)``) the C++ ``panel_linear`` on it, or oneDNN
    on the float32 or bfloat16 ``weight`` (its ``blocked`` copy, ``linear_routes.onednn_weight``, when
    given) from the row count this CPU's calibration gave its shape and dtype, or the AMX tiles on the
    pair panels (``panel_linear_tiles``) from theirs (``kernels.linear_routes.linear_form``; an LM head's
    route where ``logits``); without, by row count: the C++ ``small_linear``
    for a decode step's few rows (at most ``SMALL_LINEAR_MAX_ROWS``), which streams the weight from memory once, oneDNN up to
    ``ONEDNN_LINEAR_MAX_ROWS`` rows, and MKL (``F.linear``) above."""
    if cpp and x.dtype == torch.float32 and x.is_contiguous():
        rows = x.shape[0]
        if packed is not None:
            form = linear_form(weight, rows, logits=logits)
            if form is LinearForm.ONEDNN:
                return onednn_linear(x, weight, bias, blocked)
            out = x.new_empty(rows, weight.shape[0]) if out is None else out
            if form is LinearForm.TILES:
                ops().panel_linear_tiles(out, x, packed, False, False)
            else:
                ops().panel_linear(out, x, packed)
            return out if bias is None else out.add_(bias)
        if weight.dtype == torch.float32 and weight.is_contiguous():
            if rows <= SMALL_LINEAR_MAX_ROWS and x.shape[1] % 8 == 0:
                out = x.new_empty(rows, weight.shape[0])
                ops().small_linear(out, x, weight)
                return out if bias is None else out.add_(bias)
            if rows <= ONEDNN_LINEAR_MAX_ROWS and ONEDNN:
                return onednn_linear(x, weight, bias)
    if weight.dtype != x.dtype:  # bfloat16 weights under float32 activations, without panels
        weight = weight.to(x.dtype)
    return F.linear(x, weight, bias)


def gate_up_silu(x: torch.Tensor, weight: torch.Tensor, interleaved: torch.Tensor,
                 out: torch.Tensor | None = None, blocked: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(x @ gate^T) * (x @ up^T)`` for a contiguous float32 ``x`` and a fused ``[gate; up]``
    ``weight`` whose panels are ``interleaved`` (``kernels.prepack.pack_gate_up``), into ``out`` when
    given: one ``panel_linear_silu`` call, whose gate/up product never reaches memory (equal to
    ``panel_linear`` then ``silu_and_mul`` for K up to 1,024), or, from the row count where oneDNN
    measured faster for the weight's shape and dtype with its SiLU (``MatmulShape.gated``), oneDNN's
    product (on ``blocked``, ``linear_routes.onednn_weight(weight)``, when given) then ``silu_and_mul``,
    or from the tiles' row count ``panel_linear_tiles`` on the interleaved pair panels (AMX)."""
    rows, inter = x.shape[0], weight.shape[0] // 2
    out = x.new_empty(rows, inter) if out is None else out
    form = linear_form(weight, rows, gated=True)
    if form is LinearForm.ONEDNN:
        ops().silu_and_mul(out, onednn_linear(x, weight, prepacked=blocked))
    elif form is LinearForm.TILES:
        ops().panel_linear_tiles(out, x, interleaved, True, False)
    else:
        ops().panel_linear_silu(out, x, interleaved)
    return out


def silu_and_mul(gate_up: torch.Tensor, cpp: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """See the module docstring."""
    inter = gate_up.shape[-1] // 2
    if cpp:
        out = gate_up.new_empty(*gate_up.shape[:-1], inter) if out is None else out
        ops().silu_and_mul(out, gate_up)
        return out
    return F.silu(gate_up[..., :inter]) * gate_up[..., inter:]


def rotary_and_cache(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, slot_mapping: torch.Tensor, num_q_heads: int, num_kv_heads: int,
                     cpp: bool = False) -> None:
    """See the module docstring; ``slot_mapping`` is int64 ``[T]``."""
    if cpp:
        ops().rotary_and_cache(qkv, cos, sin, k_cache, v_cache, slot_mapping,
                                                num_q_heads, num_kv_heads)
        return
    tokens, head_dim = qkv.shape[0], k_cache.shape[3]
    heads = qkv.view(tokens, num_q_heads + 2 * num_kv_heads, head_dim)
    qk = heads[:, : num_q_heads + num_kv_heads]
    half = head_dim // 2
    c, s = cos[:, None, :], sin[:, None, :]
    rotated = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
    qk.copy_(qk * c + rotated * s)
    k = heads[:, num_q_heads : num_q_heads + num_kv_heads]
    v = heads[:, num_q_heads + num_kv_heads :]
    write_kv_cache(k, v, k_cache, v_cache, slot_mapping)


def paged_attention_cpu(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        metadata: AttentionMetadata, scale: float, req_indices: torch.Tensor,
                        out: torch.Tensor) -> torch.Tensor:
    """The C++ paged attention (no torch fallback here: ``kernels.paged_attention`` has it); writes and
    returns ``out`` ``[T, Hq, D]`` (rows of requests not in ``req_indices`` are left as they were)."""
    ops().paged_attention(out, query, k_cache, v_cache, metadata.block_tables,
                                           metadata.query_start_loc, metadata.seq_lens, req_indices, scale)
    return out
