"""Paged attention, KV-cache ops and fused decoder-step ops (torch; a C++ CPU kernel built at first use;
flash-attn on CUDA when installed)."""

from kernels.attention_metadata import AttentionMetadata, AttentionWorkspace, build_attention_metadata
from kernels.cpp_build import load_cpu_ops
from kernels.kv_cache import allocate_kv_caches, write_kv_cache
from kernels.paged_attention import (
    flash_attn_available,
    paged_attention,
    paged_attention_cpp,
    paged_attention_flash,
    paged_attention_reference,
    paged_attention_torch,
)
from kernels.torch_plan import PrefillChunk

__all__ = [
    "AttentionMetadata",
    "AttentionWorkspace",
    "PrefillChunk",
    "allocate_kv_caches",
    "build_attention_metadata",
    "flash_attn_available",
    "load_cpu_ops",
    "paged_attention",
    "paged_attention_cpp",
    "paged_attention_flash",
    "paged_attention_reference",
    "paged_attention_torch",
    "write_kv_cache",
]
