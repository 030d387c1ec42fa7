"""The torch fallback's per-step plan: gather indices and masks, built once per step from the metadata.

All requests with query length 1 attend in one padded batch (``decode_*``); every longer query is a
:class:`PrefillChunk` handled alone. The plan is cached in ``metadata.cache`` and shared by all layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.attention_metadata import AttentionMetadata

_PLAN_KEY = "torch_plan"


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
class TorchPlan:
    decode_token_idx: torch.Tensor | None  # int64 [Nd] query rows of the decode requests
    decode_block_idx: torch.Tensor | None  # int64 [Nd * decode_num_blocks] blocks to gather
    decode_num_blocks: int
    decode_mask: torch.Tensor | None  # bool [Nd, 1, 1, decode_num_blocks * block_size]
    prefills: list[PrefillChunk]


def torch_plan(metadata: AttentionMetadata) -> TorchPlan:
    """The plan of this step (built on first use, then cached on the metadata)."""
    plan = metadata.cache.get(_PLAN_KEY)
    if plan is None:
        plan = _build(metadata)
        metadata.cache[_PLAN_KEY] = plan
    return plan


def _build(md: AttentionMetadata) -> TorchPlan:
    query_lens = md.query_lens_list
    device, bs = md.block_tables.device, md.block_size
    decode_reqs = [i for i, q in enumerate(query_lens) if q == 1]
    idx = mask = rows = None
    num_blocks = 0
    if decode_reqs:
        sel = torch.tensor(decode_reqs, dtype=torch.int64, device=device)
        num_blocks = -(-max(md.seq_lens_list[i] for i in decode_reqs) // bs)
        idx = md.block_tables.index_select(0, sel)[:, :num_blocks].reshape(-1).to(torch.int64)
        lens = md.seq_lens.index_select(0, sel).to(torch.int64)
        width = num_blocks * bs
        mask = (torch.arange(width, device=device)[None, :] < lens[:, None]).view(len(decode_reqs), 1, 1, width)
        rows = md.query_start_loc.index_select(0, sel).to(torch.int64)
    return TorchPlan(rows, idx, num_blocks, mask, prefill_chunks(md, [i for i, q in enumerate(query_lens) if q > 1]))


def prefill_chunks(md: AttentionMetadata, reqs: list[int]) -> list[PrefillChunk]:
    """The chunks of requests ``reqs`` (each with more than one new token); a chunk over cached context
    gets its blocks and mask."""
    device, bs, starts = md.block_tables.device, md.block_size, md.query_start_loc_list
    prefills: list[PrefillChunk] = []
    for i in reqs:
        ctx, seq = md.context_lens_list[i], md.seq_lens_list[i]
        block_idx = mask = None
        if ctx > 0:
            nb = -(-seq // bs)
            block_idx = md.block_tables[i, :nb].to(torch.int64)
            q_pos = torch.arange(ctx, seq, device=device)
            mask = torch.arange(nb * bs, device=device)[None, :] <= q_pos[:, None]
        prefills.append(PrefillChunk(i, starts[i], starts[i + 1], ctx, seq, block_idx, mask))
    return prefills
