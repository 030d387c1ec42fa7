"""Paged decode attention as one Triton kernel (CUDA): each decode row reads only its own blocks.

The torch path gathers every decode row's blocks, padded to the batch's longest, into one contiguous
tensor and runs one masked SDPA call: three passes over K and V, and as many bytes for a row of 50
tokens as for the batch's longest. This kernel reads keys and values straight from the paged caches
through the block table, once, with an online softmax; it takes its lengths from device tensors, so a
CUDA graph can replay it with new lengths and tables.

Contract (the decode case of ``kernels.paged_attention``): ``query`` ``[B, Hq, D]``, one row a request
at its last position; caches ``[num_blocks, block_size, Hk, D]`` contiguous; ``block_tables[b]`` lists
row ``b``'s blocks in position order (int32 or int64; entries past its length are never read);
``seq_lens[b] >= 1`` keys, this step's already written. Query head ``h`` reads KV head
``h // (Hq // Hk)``. Returns ``[B, Hq, D]`` in the query's dtype; sums in float32 (float32 operands
without TF32 rounding).

One program handles one row and one KV head: the GQA group's query heads (padded to 16 rows, the
smallest matrix-unit shape) against ``TILE`` keys a step.
"""

from __future__ import annotations

import functools
import logging

import torch

logger = logging.getLogger(__name__)

TILE = 64  # keys per loop step (4 blocks of 16)
MIN_ROWS = 16  # tl.dot's smallest M


_disabled: list[str] = []  # why the kernel is off in this process (it failed to build or run here)


@functools.lru_cache(maxsize=1)
def _triton_imports() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def triton_available() -> bool:
    """True when Triton imports and the kernel has not failed in this process (it still needs a CUDA
    device, or ``TRITON_INTERPRET=1``)."""
    return not _disabled and _triton_imports()


def _turn_off(exc: BaseException) -> None:
    """Turn the kernel off for this process after it failed to build or launch (a Triton that cannot
    build it for this GPU). Logged once."""
    if not _disabled:
        logger.warning("Triton paged decode off (%s: %s); decode rows take the gather path", type(exc).__name__, exc)
        _disabled.append(f"{type(exc).__name__}: {exc}")


@functools.lru_cache(maxsize=1)
def _kernel():  # noqa: ANN202 - a triton.JITFunction, typed by Triton itself
    import triton
    import triton.language as tl

    @triton.jit
    def paged_decode(q_ptr, k_ptr, v_ptr, out_ptr, tables_ptr, seq_lens_ptr, scale,
                     stride_qt, stride_qh, stride_ot, stride_oh, stride_kb, stride_ks, stride_kh, stride_tb,
                     GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr, TILE: tl.constexpr, PRECISION: tl.constexpr):
        row = tl.program_id(0)
        kv_head = tl.program_id(1)
        seq_len = tl.load(seq_lens_ptr + row)
        g = tl.arange(0, GROUP_PAD)
        d = tl.arange(0, D_PAD)
        heads = kv_head * GROUP + g
        q_mask = (g[:, None] < GROUP) & (d[None, :] < HEAD_DIM)
        q = tl.load(q_ptr + row * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=q_mask, other=0.0)
        m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D_PAD], tl.float32)
        for start in range(0, seq_len, TILE):
            n = start + tl.arange(0, TILE)
            n_mask = n < seq_len
            block = tl.load(tables_ptr + row * stride_tb + n // BLOCK_SIZE, mask=n_mask, other=0).to(tl.int64)
            offsets = block * stride_kb + (n % BLOCK_SIZE) * stride_ks + kv_head * stride_kh
            kv_mask = n_mask[:, None] & (d[None, :] < HEAD_DIM)
            k = tl.load(k_ptr + offsets[:, None] + d[None, :], mask=kv_mask, other=0.0).to(q.dtype)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
            s = tl.where(n_mask[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_ptr + offsets[:, None] + d[None, :], mask=kv_mask, other=0.0).to(q.dtype)
            acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v, input_precision=PRECISION)
            m_i = m_new
        out = acc / l_i[:, None]
        tl.store(out_ptr + row * stride_ot + heads[:, None] * stride_oh + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=q_mask)

    return paged_decode


def _next_power_of_two(n: int, floor: int) -> int:
    return max(floor, 1 << (n - 1).bit_length())


def paged_decode_triton(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                        out: torch.Tensor | None = None) -> torch.Tensor:
    """Decode attention of every row of ``query`` over its own blocks (module docstring); writes ``out``
    (``[B, Hq, D]``, the query's dtype) when given. ``ValueError`` for shapes that do not fit."""
    num_rows, num_q_heads, head_dim = query.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if (num_q_heads % num_kv_heads or k_cache.shape != v_cache.shape or not k_cache.is_contiguous()
            or not v_cache.is_contiguous()):
        raise ValueError(f"query {tuple(query.shape)} does not fit caches {tuple(k_cache.shape)}")
    if query.stride(2) != 1 or block_tables.stride(1) != 1 or block_tables.shape[0] < num_rows:
        raise ValueError("query rows and block tables must be contiguous along their last dimension")
    if seq_lens.dim() != 1 or seq_lens.shape[0] < num_rows or seq_lens.stride(0) != 1:
        raise ValueError(f"seq_lens must hold a key count per row, got {tuple(seq_lens.shape)}")
    if out is not None and (out.shape != query.shape or out.dtype != query.dtype or out.stride(2) != 1):
        raise ValueError(f"out must be {tuple(query.shape)} {query.dtype}, contiguous along the head dim")
    group = num_q_heads // num_kv_heads
    if out is None:
        out = torch.empty_like(query)
    precision = "ieee" if query.dtype == torch.float32 else None  # fp32 without TF32; else the default
    _kernel()[(num_rows, num_kv_heads)](
        query, k_cache, v_cache, out, block_tables, seq_lens, scale,
        query.stride(0), query.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
        GROUP=group, GROUP_PAD=_next_power_of_two(group, MIN_ROWS), HEAD_DIM=head_dim,
        D_PAD=_next_power_of_two(head_dim, MIN_ROWS), BLOCK_SIZE=block_size, TILE=TILE, PRECISION=precision,
    )
    return out


def decode_or_none(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                   seq_lens: torch.Tensor, scale: float) -> torch.Tensor | None:
    """:func:`paged_decode_triton`'s output, or None when the kernel is off here or fails to build or
    launch (it then stays off for the process, logged once): the caller takes its gather path. A
    ``ValueError`` (shapes that do not fit) or running out of memory is the call's own problem and is
    raised."""
    if not triton_available():
        return None
    try:
        return paged_decode_triton(query, k_cache, v_cache, block_tables, seq_lens, scale)
    except (ValueError, torch.cuda.OutOfMemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - a Triton that cannot build it here
        _turn_off(exc)
        return None
