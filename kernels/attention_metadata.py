"""Per-step attention metadata for a packed, mixed prefill/decode batch over a paged KV cache.

A step packs ``B`` requests into ``T`` query tokens. Request ``i`` owns query rows
``[query_start_loc[i], query_start_loc[i + 1])``; those tokens sit at absolute positions
``[context_lens[i], seq_lens[i])`` of its sequence, and every position ``< seq_lens[i]`` is readable from
the cache through ``block_tables[i]`` once this step's K/V have been written (``slot_mapping``).

Invariants (checked by :func:`build_attention_metadata`):

* every request has at least one query token, and ``seq_lens[i] == context_lens[i] + query_len[i]``;
* ``block_tables[i]`` holds at least ``ceil(seq_lens[i] / block_size)`` block ids, none of them the
  reserved null block 0 (0 only pads the tail of the padded table);
* ``slot_mapping[t] = block_id * block_size + offset`` of query token ``t``'s own position.

Everything the fast CPU path needs per layer (gather indices, masks) is built here once per step, so
the per-layer work is a couple of ``index_select`` calls and one SDPA call per group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class PrefillChunk:
    """One request whose query has more than one token (a prompt chunk), handled alone.

    ``block_idx`` lists the ``ceil(seq_len / block_size)`` blocks to gather (None when
    ``context_len == 0``: the keys are exactly this step's keys, no gather needed).
    ``mask`` is a bool ``[query_len, num_blocks * block_size]`` mask (True = attend), causal with the
    diagonal offset by ``context_len``; None when ``context_len == 0`` (plain causal attention).
    """

    req_idx: int
    q_start: int
    q_end: int
    context_len: int
    seq_len: int
    block_idx: torch.Tensor | None
    mask: torch.Tensor | None


@dataclass
class AttentionMetadata:
    """Everything a paged-attention call needs for one step (shared by all layers of the step).

    Tensors live on the model's device. Python-list mirrors (``*_list``) avoid device syncs.
    """

    block_size: int
    query_start_loc: torch.Tensor  # int32 [B + 1]
    seq_lens: torch.Tensor  # int32 [B]
    context_lens: torch.Tensor  # int32 [B]
    cu_seqlens_k: torch.Tensor  # int32 [B + 1], cumulative seq_lens (flash-attn varlen)
    block_tables: torch.Tensor  # int32 [B, max_blocks], padded with 0
    slot_mapping: torch.Tensor  # int64 [T]
    max_query_len: int
    max_seq_len: int
    query_start_loc_list: list[int]
    seq_lens_list: list[int]
    context_lens_list: list[int]
    # Fast path: all requests with query_len == 1 attend in one padded batch.
    decode_token_idx: torch.Tensor | None  # int64 [Nd] query rows of the decode requests
    decode_block_idx: torch.Tensor | None  # int64 [Nd * decode_num_blocks] blocks to gather
    decode_num_blocks: int
    decode_mask: torch.Tensor | None  # bool [Nd, 1, 1, decode_num_blocks * block_size]
    all_decode: bool  # every request is a decode and decode rows are 0..T-1 in order
    prefills: list[PrefillChunk]
    workspace: AttentionWorkspace | None = None
    _float_masks: dict[tuple[int, torch.dtype], torch.Tensor] = field(default_factory=dict, repr=False)

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_list)

    @property
    def num_tokens(self) -> int:
        return self.query_start_loc_list[-1]

    def additive_mask(self, key: int, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Additive float version of a bool mask (0 where True, -inf where False), cached per step.

        ``key`` identifies the mask (-1 for the decode mask, the request index for a prefill mask).
        CPU SDPA runs markedly faster with an additive float mask than with a bool one.
        """
        cache_key = (key, dtype)
        out = self._float_masks.get(cache_key)
        if out is None:
            out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
            out.masked_fill_(~mask, float("-inf"))
            self._float_masks[cache_key] = out
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
    starts, slots = _query_starts_and_slots(query_lens, context_lens, seq_lens, block_tables, block_size)
    max_blocks = max(_cdiv(s, block_size) for s in seq_lens)
    padded = [list(t[:max_blocks]) + [0] * (max_blocks - min(len(t), max_blocks)) for t in block_tables]
    decode = _decode_metadata(query_lens, seq_lens, starts, padded, block_size, device)
    cu_k = [0]
    for s in seq_lens:
        cu_k.append(cu_k[-1] + s)
    return AttentionMetadata(
        block_size=block_size,
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        context_lens=torch.tensor(context_lens, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32, device=device),
        block_tables=torch.tensor(padded, dtype=torch.int32, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        query_start_loc_list=starts,
        seq_lens_list=seq_lens,
        context_lens_list=list(context_lens),
        **decode,
        all_decode=all(q == 1 for q in query_lens),
        prefills=_prefill_chunks(query_lens, context_lens, seq_lens, starts, padded, block_size, device),
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


def _query_starts_and_slots(
    query_lens: list[int], context_lens: list[int], seq_lens: list[int], block_tables: list[list[int]],
    block_size: int,
) -> tuple[list[int], list[int]]:
    """Each request's first query row (plus the total at the end) and the KV slot of every new token."""
    starts = [0]
    slots: list[int] = []
    for i, (q, ctx, table) in enumerate(zip(query_lens, context_lens, block_tables, strict=True)):
        if q < 1 or ctx < 0:
            raise ValueError(f"request {i}: query_len must be >= 1 and context_len >= 0, got {q}, {ctx}")
        needed = _cdiv(seq_lens[i], block_size)
        if len(table) < needed or any(b <= 0 for b in table[:needed]):
            raise ValueError(f"request {i}: needs {needed} non-null blocks, got {table[:needed]}")
        starts.append(starts[-1] + q)
        for pos in range(ctx, ctx + q):
            slots.append(table[pos // block_size] * block_size + pos % block_size)
    return starts, slots


def _decode_metadata(
    query_lens: list[int], seq_lens: list[int], starts: list[int], padded: list[list[int]], block_size: int,
    device: torch.device,
) -> dict[str, Any]:
    """The batched decode fields: token rows, flattened block ids, the width in blocks and the length mask."""
    decode_reqs = [i for i, q in enumerate(query_lens) if q == 1]
    if not decode_reqs:
        return {"decode_token_idx": None, "decode_block_idx": None, "decode_num_blocks": 0, "decode_mask": None}
    num_blocks = max(_cdiv(seq_lens[i], block_size) for i in decode_reqs)
    flat_blocks = [b for i in decode_reqs for b in padded[i][:num_blocks]]
    lens = torch.tensor([seq_lens[i] for i in decode_reqs], dtype=torch.int64, device=device)
    width = num_blocks * block_size
    mask = (torch.arange(width, device=device)[None, :] < lens[:, None]).view(len(decode_reqs), 1, 1, width)
    return {
        "decode_token_idx": torch.tensor([starts[i] for i in decode_reqs], dtype=torch.int64, device=device),
        "decode_block_idx": torch.tensor(flat_blocks, dtype=torch.int64, device=device),
        "decode_num_blocks": num_blocks,
        "decode_mask": mask,
    }


def _prefill_chunks(
    query_lens: list[int], context_lens: list[int], seq_lens: list[int], starts: list[int],
    padded: list[list[int]], block_size: int, device: torch.device,
) -> list[PrefillChunk]:
    """One chunk per request with more than one new token; a chunk over cached context gets its blocks and mask."""
    prefills: list[PrefillChunk] = []
    for i, q in enumerate(query_lens):
        if q == 1:
            continue
        ctx = context_lens[i]
        block_idx = mask = None
        if ctx > 0:
            nb = _cdiv(seq_lens[i], block_size)
            block_idx = torch.tensor(padded[i][:nb], dtype=torch.int64, device=device)
            q_pos = torch.arange(ctx, seq_lens[i], device=device)
            mask = torch.arange(nb * block_size, device=device)[None, :] <= q_pos[:, None]
        prefills.append(PrefillChunk(i, starts[i], starts[i + 1], ctx, seq_lens[i], block_idx, mask))
    return prefills
