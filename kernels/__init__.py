"""Paged attention and KV-cache ops (torch; flash-attn on CUDA when installed)."""

from kernels.attention_metadata import (
    AttentionMetadata,
    AttentionWorkspace,
    PrefillChunk,
    build_attention_metadata,
)
from kernels.kv_cache import allocate_kv_caches, write_kv_cache
from kernels.paged_attention import (
    flash_attn_available,
    paged_attention,
    paged_attention_flash,
    paged_attention_reference,
    paged_attention_torch,
)

__all__ = [
    "AttentionMetadata",
    "AttentionWorkspace",
    "PrefillChunk",
    "allocate_kv_caches",
    "build_attention_metadata",
    "flash_attn_available",
    "paged_attention",
    "paged_attention_flash",
    "paged_attention_reference",
    "paged_attention_torch",
    "write_kv_cache",
]
