"""Paged attention over a packed, mixed prefill/decode batch.

Shapes: ``query`` ``[T, Hq, D]``; this step's ``key``/``value`` ``[T, Hk, D]`` (already written into
the caches with :func:`kernels.kv_cache.write_kv_cache`); caches ``[num_blocks, block_size, Hk, D]``,
in the query's dtype or, under float32 queries, bfloat16 (a fresh prompt chunk that SDPA takes attends
over this step's own float32 keys and values). Over a bfloat16 cache the C++ kernels multiply in
bfloat16 where the build has those products (AVX512_BF16: the query and the softmax's numerators
rounded to bfloat16, float32 sums), elsewhere they read it back as its exact float32 values.
``Hq`` is a multiple of ``Hk`` and query head ``h`` reads KV head ``h // (Hq // Hk)`` (HF's
``repeat_kv`` convention). Query row ``t`` of request ``i`` sits at absolute position
``context_lens[i] + (t - query_start_loc[i])`` and attends to positions ``<=`` its own (causal inside the
request, nothing across requests). Output: ``[T, Hq, D]`` in the query dtype.

Three implementations share this contract:

* :func:`paged_attention_reference`: per-request loop with explicit float64 math; the test oracle.
* :func:`paged_attention_torch`: the fast path on any device: all decodes (query length 1) in one
  padded gather + one SDPA call (on CUDA a step of decodes alone goes to the Triton kernel of
  ``kernels.triton_decode``, which reads each row's own blocks), each prefill chunk in one SDPA call (plain causal when it has no
  cached context, otherwise a causal mask offset by its context length).
* :func:`paged_attention_flash`: flash-attn's ``flash_attn_varlen_func`` with ``block_table`` (CUDA,
  fp16/bf16, block sizes that are multiples of 256 as flash-attn 2 requires).
* :func:`paged_attention_cpp`: the C++ CPU kernel (``kernels/csrc/cpu_ops.cpp``) reads keys and
  values straight from the paged caches: a decode row's GQA group as vectors over the keys
  (``attend_f32.h``; ``attend_bf16.h`` over a bfloat16 cache with bfloat16 products), a chunk's tile
  of rows as two register-blocked matrix products (``attend_tiled.h``; ``attend_tiled_bf16.h``). A fresh prompt chunk long enough goes to SDPA's causal kernel on this step's
  contiguous keys, and a chunk over cached context (an agent's next turn) long enough to one masked
  SDPA call over its gathered blocks, from the lengths where SDPA measured faster on this CPU, for this
  head shape, cache dtype and thread count (``kernels.route_calibration``).

:func:`paged_attention` picks one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata, AttentionWorkspace
from kernels.cpu_ops import paged_attention_cpu, use_cpp
from kernels.route_calibration import HeadShape, SdpaRoutes, sdpa_routes
from kernels.static_decode import paged_attention_static_decode
from kernels.torch_plan import PrefillChunk, prefill_chunks, torch_plan
from kernels.triton_decode import decode_or_none

# Set (tests, benchmarks) to override the calibrated routes: chunk lengths from which SDPA takes a chunk.
SDPA_MIN_FRESH_QUERY: int | None = None
SDPA_MIN_CONTEXT_QUERY: int | None = None
_CPP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _layout(query: torch.Tensor, k_cache: torch.Tensor) -> tuple[int, int, int, int, int]:
    """``(num_q_heads, num_kv_heads, head_dim, block_size, group)`` of a query ``[T, Hq, D]`` against a
    cache ``[blocks, block_size, Hk, D]``; ``group = Hq // Hk`` query heads share one KV head."""
    _, num_q_heads, head_dim = query.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    return num_q_heads, num_kv_heads, head_dim, block_size, num_q_heads // num_kv_heads


def paged_attention_reference(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Oracle: every key/value is read from the caches slot by slot; math in float64."""
    _, num_kv_heads, head_dim, block_size, group = _layout(query, k_cache)
    k_flat = k_cache.reshape(-1, num_kv_heads, head_dim)
    v_flat = v_cache.reshape(-1, num_kv_heads, head_dim)
    out = torch.empty_like(query)
    starts = metadata.query_start_loc.tolist()
    seq_lens = metadata.seq_lens.tolist()
    tables = metadata.block_tables.tolist()
    for i, seq_len in enumerate(seq_lens):
        q_start, q_end = starts[i], starts[i + 1]
        context_len = seq_len - (q_end - q_start)
        slots = torch.tensor(
            [tables[i][pos // block_size] * block_size + pos % block_size for pos in range(seq_len)],
            dtype=torch.int64,
            device=query.device,
        )
        k = k_flat[slots].double().repeat_interleave(group, dim=1)  # [S, Hq, D]
        v = v_flat[slots].double().repeat_interleave(group, dim=1)
        q = query[q_start:q_end].double()  # [q, Hq, D]
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        q_pos = torch.arange(context_len, seq_len, device=query.device)[:, None]
        k_pos = torch.arange(seq_len, device=query.device)[None, :]
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
        probs = scores.softmax(dim=-1)
        out[q_start:q_end] = torch.einsum("hqk,khd->qhd", probs, v).to(query.dtype)
    return out


def _gather_blocks(
    cache: torch.Tensor, block_idx: torch.Tensor, workspace: AttentionWorkspace, name: str, dtype: torch.dtype
) -> torch.Tensor:
    """Copy ``cache[block_idx]`` into a reused workspace buffer in ``dtype`` (the queries': a bfloat16
    cache under float32 queries is widened): ``[len(block_idx), bs, Hk, D]``."""
    shape = (block_idx.numel(), *cache.shape[1:])
    buf = workspace.get(name, shape, cache.dtype, cache.device)
    torch.index_select(cache, 0, block_idx, out=buf)
    if dtype == cache.dtype:
        return buf
    wide = workspace.get(f"{name}_wide", shape, dtype, cache.device)
    return wide.copy_(buf)


def paged_attention_torch(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Fast torch path (CPU or CUDA); see the module docstring for the contract."""
    if metadata.all_decode and query.is_cuda:  # each row reads only its own blocks, where Triton runs
        out = decode_or_none(query, k_cache, v_cache, metadata.block_tables, metadata.seq_lens, scale)
        if out is not None:
            return out
    num_q_heads, num_kv_heads, head_dim, block_size, group = _layout(query, k_cache)
    num_tokens = query.shape[0]
    workspace = metadata.workspace if metadata.workspace is not None else AttentionWorkspace()
    plan = torch_plan(metadata)
    out: torch.Tensor | None = None
    if not metadata.all_decode:
        out = query.new_empty(num_tokens, num_q_heads, head_dim)

    if plan.decode_token_idx is not None:
        assert plan.decode_block_idx is not None and plan.decode_mask is not None
        num_decodes = plan.decode_token_idx.numel()
        q = query if metadata.all_decode else query.index_select(0, plan.decode_token_idx)
        # GQA packing: the group's query heads become G query rows of one KV head, no repeat_kv.
        q = q.reshape(num_decodes, num_kv_heads, group, head_dim)
        width = plan.decode_num_blocks * block_size
        k = _gather_blocks(k_cache, plan.decode_block_idx, workspace, "decode_k", query.dtype)
        v = _gather_blocks(v_cache, plan.decode_block_idx, workspace, "decode_v", query.dtype)
        k = k.view(num_decodes, width, num_kv_heads, head_dim).transpose(1, 2)
        v = v.view(num_decodes, width, num_kv_heads, head_dim).transpose(1, 2)
        mask = metadata.additive_mask(-1, plan.decode_mask, query.dtype)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        o = o.reshape(num_decodes, num_q_heads, head_dim)
        if out is None:
            return o
        out.index_copy_(0, plan.decode_token_idx, o)

    assert out is not None
    for chunk in plan.prefills:
        if chunk.context_len == 0:
            out[chunk.q_start : chunk.q_end] = _fresh_causal(query, key, value, chunk.q_start, chunk.q_end,
                                                            scale, group)
        else:
            out[chunk.q_start : chunk.q_end] = _context_chunk(query, k_cache, v_cache, metadata, chunk,
                                                              workspace, scale, group)
    return out


def _context_chunk(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, metadata: AttentionMetadata,
                   chunk: PrefillChunk, workspace: AttentionWorkspace, scale: float, group: int) -> torch.Tensor:
    """One prefill chunk over cached context: its blocks gathered, one masked SDPA call: ``[q, Hq, D]``."""
    assert chunk.block_idx is not None and chunk.mask is not None
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    q = query[chunk.q_start : chunk.q_end].transpose(0, 1).unsqueeze(0)  # [1, Hq, q, D]
    k = _gather_blocks(k_cache, chunk.block_idx, workspace, "prefill_k", query.dtype)
    v = _gather_blocks(v_cache, chunk.block_idx, workspace, "prefill_v", query.dtype)
    k = k.view(1, -1, num_kv_heads, head_dim).transpose(1, 2)
    v = v.view(1, -1, num_kv_heads, head_dim).transpose(1, 2)
    mask = metadata.additive_mask(chunk.req_idx, chunk.mask, query.dtype)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=group > 1)
    return o[0].transpose(0, 1)


def _fresh_causal(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, start: int, end: int,
                  scale: float, group: int) -> torch.Tensor:
    """Plain causal SDPA of one chunk with no cached context over this step's keys: ``[q, Hq, D]``."""
    q = query[start:end].transpose(0, 1).unsqueeze(0)
    k = key[start:end].transpose(0, 1).unsqueeze(0)
    v = value[start:end].transpose(0, 1).unsqueeze(0)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=group > 1)
    return o[0].transpose(0, 1)


def chunk_routes(query: torch.Tensor, k_cache: torch.Tensor) -> SdpaRoutes:
    """The routes for this query's head shape: the module's overrides where set, else this CPU's
    calibration (measured once per CPU, build, threads and shape)."""
    if SDPA_MIN_FRESH_QUERY is not None and SDPA_MIN_CONTEXT_QUERY is not None:
        return SdpaRoutes(SDPA_MIN_FRESH_QUERY, SDPA_MIN_CONTEXT_QUERY)
    num_q_heads, num_kv_heads, head_dim, _, _ = _layout(query, k_cache)
    cache_dtype = None if k_cache.dtype == query.dtype else str(k_cache.dtype).removeprefix("torch.")
    shape = HeadShape(num_q_heads, num_kv_heads, head_dim, str(query.dtype).removeprefix("torch."), cache_dtype)
    calibrated = sdpa_routes(shape, paged_attention_cpp)
    return SdpaRoutes(calibrated.min_fresh_query if SDPA_MIN_FRESH_QUERY is None else SDPA_MIN_FRESH_QUERY,
                      calibrated.min_context_query if SDPA_MIN_CONTEXT_QUERY is None else SDPA_MIN_CONTEXT_QUERY)


def _cpp_plan(metadata: AttentionMetadata,
              routes: SdpaRoutes) -> tuple[torch.Tensor | None, list[tuple[int, int]], list[PrefillChunk]]:
    """``(requests for the C++ kernel as int32 or None, fresh long chunks as (q_start, q_end), long
    chunks over cached context for SDPA)``, cached per step and routes."""
    key = ("cpp_plan", routes)
    plan = metadata.cache.get(key)
    if plan is None:
        starts, ctx = metadata.query_start_loc_list, metadata.context_lens_list
        qlen = [starts[i + 1] - starts[i] for i in range(metadata.num_reqs)]
        fresh = [i for i in range(metadata.num_reqs) if ctx[i] == 0 and qlen[i] >= routes.min_fresh_query]
        cont = [i for i in range(metadata.num_reqs) if ctx[i] > 0 and qlen[i] >= routes.min_context_query]
        if not fresh and not cont:
            idx = torch.arange(metadata.num_reqs, dtype=torch.int32)
        else:
            skip = set(fresh) | set(cont)
            rest = [i for i in range(metadata.num_reqs) if i not in skip]
            idx = torch.tensor(rest, dtype=torch.int32) if rest else None
        plan = (idx, [(starts[i], starts[i + 1]) for i in fresh], prefill_chunks(metadata, cont))
        metadata.cache[key] = plan
    return plan


def cpp_requests(query: torch.Tensor, k_cache: torch.Tensor, metadata: AttentionMetadata) -> torch.Tensor | None:
    """The step's requests (int32) when :func:`paged_attention` gives every one of them to the C++
    kernel (float queries on CPU, no static decode route, no chunk long enough for SDPA on this CPU),
    else None: what a whole step's layers in one call (``kernels.layer_stack``) need. ``query`` is
    any ``[T, Hq, D]`` of the step's query dtype (only its shape and dtype are read)."""
    if metadata.static_decode or not use_cpp(query.device) or query.dtype not in _CPP_DTYPES:
        return None
    routes = metadata.cache.get("chunk_routes")
    if routes is None:
        routes = metadata.cache["chunk_routes"] = chunk_routes(query, k_cache)
    idx, fresh, cont = _cpp_plan(metadata, routes)
    return idx if not fresh and not cont else None


def paged_attention_cpp(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
    routes: SdpaRoutes | None = None,
) -> torch.Tensor:
    """The C++ CPU path (needs ``kernels.cpu_ops.use_cpp``); same contract as the module docstring.
    ``query`` may be a row-strided view (e.g. into a fused QKV projection); ``key``/``value`` are only
    read for fresh long chunks. ``routes`` (default: this CPU's, see :func:`chunk_routes`, looked up once
    per step: every layer of a step has the same head shape) says which chunks go to SDPA."""
    if routes is None:
        routes = metadata.cache.get("chunk_routes")
        if routes is None:
            routes = metadata.cache["chunk_routes"] = chunk_routes(query, k_cache)
    idx, fresh, cont = _cpp_plan(metadata, routes)
    workspace = metadata.workspace if metadata.workspace is not None else AttentionWorkspace()
    # One output buffer per step, shared by the layers: each layer's output is read (by o_proj) before
    # the next layer's attention writes it again.
    out = workspace.get("attn_out", tuple(query.shape), query.dtype, query.device)
    if idx is not None:
        paged_attention_cpu(query, k_cache, v_cache, metadata, scale, idx, out)
    group = query.shape[1] // k_cache.shape[2]
    for start, end in fresh:
        out[start:end] = _fresh_causal(query, key, value, start, end, scale, group)
    for chunk in cont:
        out[chunk.q_start : chunk.q_end] = _context_chunk(query, k_cache, v_cache, metadata, chunk, workspace,
                                                          scale, group)
    return out


@functools.lru_cache(maxsize=1)
def _flash_attn_varlen_func() -> Callable[..., torch.Tensor] | None:
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def flash_attn_available() -> bool:
    """True when the optional ``flash_attn`` package can be imported."""
    return _flash_attn_varlen_func() is not None


def paged_attention_flash(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """flash-attn varlen with a block table (CUDA; fp16/bf16; ``block_size % 256 == 0``).

    flash-attn aligns the causal diagonal bottom-right when ``seqlen_q < seqlen_k``, which is exactly
    "query row at position ``context_len + j`` sees keys ``<=`` it".
    """
    fn = _flash_attn_varlen_func()
    if fn is None:
        raise RuntimeError("flash_attn is not installed")
    return fn(
        query.contiguous(),
        k_cache,
        v_cache,
        cu_seqlens_q=metadata.query_start_loc,
        cu_seqlens_k=metadata.cu_seqlens_k,
        max_seqlen_q=metadata.max_query_len,
        max_seqlen_k=metadata.max_seq_len,
        softmax_scale=scale,
        causal=True,
        block_table=metadata.block_tables,
    )


def paged_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Dispatch: a fixed-shape decode step to its own route (``kernels.static_decode``), else flash-attn
    on CUDA when usable, else the C++ kernels on CPU, else the torch path. Same contract as the module."""
    if metadata.static_decode:
        return paged_attention_static_decode(query, k_cache, v_cache, metadata, scale)
    if (
        query.is_cuda
        and query.dtype in (torch.float16, torch.bfloat16)
        and metadata.block_size % 256 == 0
        and flash_attn_available()
    ):
        return paged_attention_flash(query, k_cache, v_cache, metadata, scale)
    if use_cpp(query.device) and query.dtype in _CPP_DTYPES:
        return paged_attention_cpp(query, key, value, k_cache, v_cache, metadata, scale)
    return paged_attention_torch(query, key, value, k_cache, v_cache, metadata, scale)
