"""Per-step attention metadata for a packed, mixed prefill/decode batch over a paged KV cache.

A step packs ``B`` requests into ``T`` query tokens. Request ``i`` owns query rows
``[query_start_loc[i], query_start_loc[i + 1])``; those tokens sit at absolute positions
``[context_lens[i], seq_lens[i])`` of its sequence, and every position ``< seq_lens[i]`` is readable from
the cache through ``block_tables[i]`` once this step's K/V have been written (``slot_mapping``).

Invariants (checked by :func:`build_attention_metadata`):

* every request has at least one query token, and ``seq_lens[i] == context_lens[i] + query_len[i]``;
* ``block_tables[i]`` holds at least ``ceil(seq_lens[i] / block_size)`` block ids, none of them the
  reserved null block 0 (0 only pads the tail of the padded table);
* ``slot_mapping[t] = block_id * block_size + offset`` of query token ``t``'s own position, and
  ``positions[t]`` is that position.

Per-token fields of a step with a prefill chunk are computed with tensor ops (no Python loop over
its tokens); a step of decodes alone, one token a request, takes its slots from the lists. What only
the torch fallback needs (gather indices, masks) is built lazily, once per step, by ``kernels.torch_plan``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import numpy as np
import torch


class AttentionWorkspace:
    """Grow-only scratch buffers reused across layers and steps.

    Fresh multi-megabyte CPU allocations are page-faulted on first touch and cost more than the gather
    that fills them; reusing one buffer per name avoids that. A buffer returned by :meth:`get` stays
    valid until the next :meth:`get` with the same name (the caller must not keep it longer).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Return an uninitialised contiguous tensor of ``shape`` backed by the named buffer."""
        numel = 1
        for s in shape:
            numel *= s
        key = (name, dtype, device)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(max(numel, 1), dtype=dtype, device=device)
            self._buffers[key] = buf
        return buf[:numel].view(shape)

    def release(self) -> None:
        """Drop every buffer (they regrow to the next steps' sizes): after a one-off larger step, such
        as the start-up prefill profile, so its buffers do not stay resident while serving."""
        self._buffers.clear()


@dataclass
class AttentionMetadata:
    """Everything a paged-attention call needs for one step (shared by all layers of the step).

    Tensors live on the model's device. Python-list mirrors (``*_list``) avoid device syncs.
    ``cache`` holds per-step derived data (plans, float masks) that layers share.
    """

    block_size: int
    query_start_loc: torch.Tensor  # int32 [B + 1]
    seq_lens: torch.Tensor  # int32 [B]
    context_lens: torch.Tensor  # int32 [B]
    cu_seqlens_k: torch.Tensor  # int32 [B + 1], cumulative seq_lens (flash-attn varlen)
    block_tables: torch.Tensor  # int32 [B, max_blocks], padded with 0
    slot_mapping: torch.Tensor  # int64 [T]
    positions: torch.Tensor  # int64 [T]
    max_query_len: int
    max_seq_len: int
    query_start_loc_list: list[int]
    seq_lens_list: list[int]
    context_lens_list: list[int]
    all_decode: bool  # every request has exactly one query token
    # A fixed-shape decode step (kernels.static_decode): lengths and tables live only in the tensors,
    # which change between CUDA-graph replays; the list mirrors and max_seq_len are upper bounds.
    static_decode: bool = False
    workspace: AttentionWorkspace | None = None
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_list)

    @property
    def num_tokens(self) -> int:
        return self.query_start_loc_list[-1]

    @property
    def query_lens_list(self) -> list[int]:
        s = self.query_start_loc_list
        return [s[i + 1] - s[i] for i in range(len(s) - 1)]

    def additive_mask(self, key: int, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Additive float version of a bool mask (0 where True, -inf where False), cached per step.

        ``key`` identifies the mask (-1 for the decode mask, the request index for a prefill mask).
        CPU SDPA runs markedly faster with an additive float mask than with a bool one.
        """
        cache_key = ("float_mask", key, dtype)
        out = self.cache.get(cache_key)
        if out is None:
            out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
            out.masked_fill_(~mask, float("-inf"))
            self.cache[cache_key] = out
        return out


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def build_attention_metadata(
    query_lens: list[int],
    context_lens: list[int],
    block_tables: list[list[int]],
    block_size: int,
    device: torch.device | str = "cpu",
    workspace: AttentionWorkspace | None = None,
) -> AttentionMetadata:
    """Build the metadata of one step from per-request Python lists.

    ``query_lens[i]`` new tokens of request ``i`` follow ``context_lens[i]`` tokens already in the cache;
    ``block_tables[i]`` are its block ids in order (it may hold more blocks than needed).
    Raises ``ValueError`` when an invariant of the module docstring does not hold.
    """
    _check_shapes(query_lens, context_lens, block_tables, block_size)
    device = torch.device(device)
    seq_lens = [c + q for c, q in zip(context_lens, query_lens, strict=True)]
    _check_tables(block_tables, seq_lens, block_size)
    starts = [0, *accumulate(query_lens)]
    max_blocks = _cdiv(max(seq_lens), block_size)
    padded = [t[:max_blocks] if len(t) >= max_blocks else [*t, *([0] * (max_blocks - len(t)))]
              for t in block_tables]
    tables = torch.from_numpy(np.array(padded, dtype=np.int32))  # numpy reads nested lists faster
    seq_t = torch.tensor(seq_lens, dtype=torch.int32)
    ctx_t = torch.tensor(context_lens, dtype=torch.int32)
    all_decode = starts[-1] == len(query_lens)
    if all_decode:
        slots, positions = _decode_slots(block_tables, context_lens, block_size), ctx_t.to(torch.int64)
    else:
        qlen_t = torch.tensor(query_lens, dtype=torch.int64)
        slots, positions = _slots_and_positions(tables, ctx_t, qlen_t, starts[-1], block_size)
    return AttentionMetadata(
        block_size=block_size,
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        seq_lens=seq_t.to(device),
        context_lens=ctx_t.to(device),
        cu_seqlens_k=torch.tensor([0, *accumulate(seq_lens)], dtype=torch.int32, device=device),
        block_tables=tables.to(device),
        slot_mapping=slots.to(device),
        positions=positions.to(device),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        query_start_loc_list=starts,
        seq_lens_list=seq_lens,
        context_lens_list=list(context_lens),
        all_decode=all_decode,
        workspace=workspace,
    )


def _check_shapes(
    query_lens: list[int], context_lens: list[int], block_tables: list[list[int]], block_size: int
) -> None:
    num_reqs = len(query_lens)
    if not (len(context_lens) == num_reqs == len(block_tables)) or num_reqs == 0:
        raise ValueError("query_lens, context_lens and block_tables must be non-empty and of equal length")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if min(query_lens) < 1 or min(context_lens) < 0:
        i = next(i for i, (q, c) in enumerate(zip(query_lens, context_lens, strict=True)) if q < 1 or c < 0)
        raise ValueError(f"request {i}: query_len must be >= 1 and context_len >= 0, "
                         f"got {query_lens[i]}, {context_lens[i]}")


def _check_tables(block_tables: list[list[int]], seq_lens: list[int], block_size: int) -> None:
    """Every block a request needs is a real block (a short table would be padded with the null block 0).
    Plain list work: a slice and a ``min`` per request, cheaper than tensor ops at a step's sizes."""
    for i, (table, seq_len) in enumerate(zip(block_tables, seq_lens, strict=True)):
        n = _cdiv(seq_len, block_size)
        if len(table) < n or min(table[:n]) <= 0:
            raise ValueError(f"request {i}: needs {n} non-null blocks, got {[*table[:n], *([0] * (n - len(table)))]}")


def _decode_slots(block_tables: list[list[int]], context_lens: list[int], block_size: int) -> torch.Tensor:
    """``slot_mapping`` of a step of decodes (one token a request, at position ``context_len``), int64."""
    return torch.tensor([table[pos // block_size] * block_size + pos % block_size
                         for table, pos in zip(block_tables, context_lens, strict=True)], dtype=torch.int64)


def _slots_and_positions(tables: torch.Tensor, context_lens: torch.Tensor, query_lens: torch.Tensor,
                         num_tokens: int, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(slot_mapping, positions)`` of every query token of a step with a prefill chunk, int64 ``[T]``,
    with tensor ops only (a step of decodes alone: :func:`_decode_slots`)."""
    num_reqs = tables.shape[0]
    req = torch.repeat_interleave(torch.arange(num_reqs), query_lens, output_size=num_tokens)
    first_row = torch.cumsum(query_lens, 0) - query_lens
    positions = torch.arange(num_tokens) - first_row[req] + context_lens.to(torch.int64)[req]
    blocks = tables[req, positions // block_size].to(torch.int64)
    return blocks * block_size + positions % block_size, positions
