"""Decode steps of a fixed shape: device buffers that a CUDA graph replays with new tokens and tables.

A :class:`StaticDecodeBatch` holds one decode step of ``rows`` requests (one query token each) whose
block tables are at most ``width`` blocks long, in one packed int64 device tensor: token ids,
positions, slot mapping, key counts, cumulative key counts and the padded tables. :meth:`fill` writes a
step's values through one host-to-device copy; the tensors themselves never move, so work recorded on
them (a captured CUDA graph) reads the new step when replayed.

Rows past the step's requests are padding: token 0 at position 0 over one key in slot 0 of the null
block 0, which no request reads (its attention is masked out or never loaded), so padding never
changes a real row's result. Tables are padded with block 0 past each request's blocks.

:func:`paged_attention_static_decode` is the attention of such a step: the Triton kernel, which reads
each row's own blocks, where it runs; else one masked SDPA call over the tables gathered to the full
``width`` (fixed shapes, no host sync).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from kernels.attention_metadata import AttentionMetadata
from kernels.triton_decode import decode_or_none, triton_available

# Set (tests) to force a route of paged_attention_static_decode: "triton" or "gather".
STATIC_DECODE_ROUTE: str | None = None


class StaticDecodeBatch:
    """The buffers of one decode-step shape (module docstring). ``metadata`` is the step's
    :class:`AttentionMetadata` over them (``static_decode``: its lengths live only in the tensors)."""

    def __init__(self, rows: int, width: int, block_size: int, device: torch.device) -> None:
        if rows < 1 or width < 1:
            raise ValueError(f"a static decode batch needs rows >= 1 and width >= 1, got {rows}, {width}")
        self.rows, self.width, self.block_size = rows, width, block_size
        size = 5 * rows + 1 + rows * width
        self._packed = torch.zeros(size, dtype=torch.int64, device=device)
        host = torch.zeros(size, dtype=torch.int64)
        self._host = host.pin_memory() if device.type == "cuda" else host
        self._host_np = self._host.numpy()
        self._uploaded: torch.cuda.Event | None = None  # the last copy to the device (CUDA)
        self.input_ids, self.positions, self.slot_mapping, self.seq_lens = (
            self._packed[i * rows : (i + 1) * rows] for i in range(4))
        self.cu_seqlens_k = self._packed[4 * rows : 5 * rows + 1]
        self.block_tables = self._packed[5 * rows + 1 :].view(rows, width)
        steps = list(range(rows + 1))
        self.metadata = AttentionMetadata(
            block_size=block_size,
            query_start_loc=torch.tensor(steps, dtype=torch.int32, device=device),
            seq_lens=self.seq_lens, context_lens=self.positions, cu_seqlens_k=self.cu_seqlens_k,
            block_tables=self.block_tables, slot_mapping=self.slot_mapping, positions=self.positions,
            max_query_len=1, max_seq_len=width * block_size, query_start_loc_list=steps,
            seq_lens_list=[width * block_size] * rows, context_lens_list=[width * block_size - 1] * rows,
            all_decode=True, static_decode=True,
        )

    def fill(self, token_ids: list[int], context_lens: list[int], block_tables: list[list[int]]) -> None:
        """Write one decode step: request ``i`` decodes ``token_ids[i]`` at position ``context_lens[i]``
        over ``block_tables[i]``; no requests at all writes a step of padding alone (what a graph is
        first captured on). ``ValueError`` when it does not fit this shape.

        The host buffer is pinned and copied without blocking; a ``fill`` first waits for the previous
        one's copy, so it never rewrites bytes still on their way to the device."""
        num = len(token_ids)
        if num > self.rows or len(context_lens) != num or len(block_tables) != num:
            raise ValueError(f"{num} decode rows do not fit a static batch of {self.rows}")
        rows, width, bs = self.rows, self.width, self.block_size
        host = self._cleared_host()
        tables = host[5 * rows + 1 :].reshape(rows, width)
        for i, table in enumerate(block_tables):
            n = min(len(table), width)
            tables[i, :n] = table[:n]
        positions = np.asarray(context_lens, dtype=np.int64)
        if num and (positions.min() < 0 or int(positions.max()) >= width * bs):
            raise ValueError(f"a decode position past this batch's {width * bs} keys")
        blocks = tables[np.arange(num), positions // bs]
        if (blocks <= 0).any():
            raise ValueError("a decode row's block table misses the block of its position")
        host[:num] = token_ids
        host[rows : rows + num] = positions
        host[2 * rows : 2 * rows + num] = blocks * bs + positions % bs
        seq_lens = host[3 * rows : 4 * rows]
        seq_lens[:] = 1
        seq_lens[:num] = positions + 1
        host[4 * rows + 1 : 5 * rows + 1] = np.cumsum(seq_lens)
        self._upload()

    def fill_probe(self) -> None:
        """A step that writes and reads only the null block, unlike padding: row ``r < block_size``
        decodes token ``r`` at position ``r`` over the ``r + 1`` keys of block 0 (row 0 is padding's own
        token and position, so the rows past ``block_size``, padding, write the same slot alike). What
        a graph's replay is checked on: tokens, positions and lengths differ from the capture's."""
        rows = self.rows
        host = self._cleared_host()
        probe = np.arange(min(rows, self.block_size), dtype=np.int64)
        n = len(probe)
        host[:n] = probe
        host[rows : rows + n] = probe
        host[2 * rows : 2 * rows + n] = probe
        seq_lens = host[3 * rows : 4 * rows]
        seq_lens[:] = 1
        seq_lens[:n] = probe + 1
        host[4 * rows + 1 : 5 * rows + 1] = np.cumsum(seq_lens)
        self._upload()

    def _cleared_host(self) -> np.ndarray:
        if self._uploaded is not None:
            self._uploaded.synchronize()
        self._host_np[:] = 0
        return self._host_np

    def _upload(self) -> None:
        self._packed.copy_(self._host, non_blocking=True)
        if self._packed.is_cuda:
            self._uploaded = torch.cuda.Event()
            self._uploaded.record()


def _static_route(query: torch.Tensor) -> str:
    if STATIC_DECODE_ROUTE is not None:
        return STATIC_DECODE_ROUTE
    return "triton" if query.is_cuda and triton_available() else "gather"


def paged_attention_static_decode(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                  metadata: AttentionMetadata, scale: float) -> torch.Tensor:
    """Decode attention of a :class:`StaticDecodeBatch` step (``metadata.static_decode``): ``query``
    ``[rows, Hq, D]`` -> ``[rows, Hq, D]``, with no host sync and no shape that depends on the lengths."""
    if _static_route(query) == "triton":
        out = decode_or_none(query, k_cache, v_cache, metadata.block_tables, metadata.seq_lens, scale)
        if out is not None:
            return out
    rows, num_q_heads, head_dim = query.shape
    num_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    keys = metadata.block_tables.shape[1] * block_size
    index = metadata.block_tables.reshape(-1)
    k = k_cache.index_select(0, index).view(rows, keys, num_kv_heads, head_dim).transpose(1, 2)
    v = v_cache.index_select(0, index).view(rows, keys, num_kv_heads, head_dim).transpose(1, 2)
    visible = torch.arange(keys, device=query.device)[None, :] < metadata.seq_lens[:, None]
    mask = torch.zeros(visible.shape, dtype=query.dtype, device=query.device).masked_fill_(~visible, float("-inf"))
    q = query.reshape(rows, num_kv_heads, num_q_heads // num_kv_heads, head_dim)
    o = F.scaled_dot_product_attention(q, k.to(query.dtype), v.to(query.dtype), attn_mask=mask[:, None, None, :],
                                       scale=scale)
    return o.reshape(rows, num_q_heads, head_dim)
