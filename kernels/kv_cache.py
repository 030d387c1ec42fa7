"""KV-cache allocation and the KV write op.

Layout per layer (flash-attn's paged-KV layout): ``k_cache`` and ``v_cache`` are each
``[num_blocks, block_size, num_kv_heads, head_dim]`` and contiguous. Slot ``s`` is row
``s // block_size``, offset ``s % block_size``. Block 0 is the reserved null block: it pads block tables
and is never written by a valid slot mapping.
"""

from __future__ import annotations

import torch


def allocate_kv_caches(
    num_layers: int,
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Allocate zeroed ``(k_cache, v_cache)`` pairs, one per layer, in the layout above."""
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    return [
        (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
        for _ in range(num_layers)
    ]


def write_kv_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write ``key[t]``/``value[t]`` (``[T, Hk, D]``, any strides) into slot ``slot_mapping[t]`` (int64 [T]).

    Slots must be in range and distinct, except slots of the null block 0, which only padding rows
    write (a fixed-shape decode step's, all with the same values); the caches must be contiguous (they are viewed as
    ``[num_blocks * block_size, Hk, D]``). Values are cast to the cache dtype.
    """
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    k_flat = k_cache.view(-1, num_kv_heads, head_dim)
    v_flat = v_cache.view(-1, num_kv_heads, head_dim)
    k_flat.index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_flat.index_copy_(0, slot_mapping, value.to(v_cache.dtype))
