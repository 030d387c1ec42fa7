"""The second KV tier's bytes: a host-memory store of whole KV blocks, and the copies in and out of it.

The scheduler (``scheduler.kv_tier``) decides every move and lists it in ``SchedulerOutput.kv_copies``
as ``(SAVE, block, slot)`` or ``(LOAD, slot, block)`` (the vocabulary and a block's size in each form:
``scheduler.tier_copy``); ``HostKVStore.apply`` performs them in that order
before the step's forward pass. Per layer the store holds ``[num_slots, block_size, num_kv_heads,
head_dim]`` for K and for V, in one of three forms:

- ``auto``: the pool's dtype, lossless (a reload gives back the exact KV);
- ``bfloat16``: half the bytes of a float32 pool (rounding to 8 mantissa bits);
- ``int8``: a quarter of float32, symmetric 8-bit with one float32 scale per (slot, head).

On CPU the copies of a run of saves or loads are one C++ call over every layer (``kv_tier_copy``,
bit-identical to the torch path it replaces, which stays as the fallback). On CUDA the store is pinned
host memory and the copies are synchronous, before the forward pass (not yet overlapped with compute
on a side stream). Invariants: ``apply`` keeps the listed order between
saves and loads; of several saves into one slot between two loads only the last is kept (the earlier
entries were evicted before anyone could load them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from kernels.cpp_build import ops
from kernels.cpu_ops import use_cpp
from scheduler.tier_copy import OFFLOAD_DTYPES, SAVE, KVCopy

__all__ = ["HostKVStore"]


def _store_dtype(kind: str, pool_dtype: torch.dtype) -> torch.dtype:
    if kind not in OFFLOAD_DTYPES:
        raise ValueError(f"kv offload dtype must be one of {OFFLOAD_DTYPES}, got {kind!r}")
    return {"auto": pool_dtype, "bfloat16": torch.bfloat16, "int8": torch.int8}[kind]


class HostKVStore:
    """``num_slots`` blocks of KV for every layer, in host memory; see the module docstring."""

    def __init__(self, num_slots: int, kv_caches: Sequence[tuple[torch.Tensor, torch.Tensor]], kind: str = "auto") -> None:
        if num_slots < 1:
            raise ValueError("a KV store needs at least one slot")
        self.kind = kind
        self.num_slots = num_slots
        self.kv_caches = kv_caches
        k0 = kv_caches[0][0]
        self.pool_dtype = k0.dtype
        self.dtype = _store_dtype(kind, k0.dtype)
        pin = k0.device.type == "cuda"
        shape = (num_slots, *k0.shape[1:])
        # Uninitialised: a slot is read only after a save wrote it, and untouched pages cost no memory.
        self.data = [(torch.empty(shape, dtype=self.dtype, pin_memory=pin),
                      torch.empty(shape, dtype=self.dtype, pin_memory=pin)) for _ in kv_caches]
        heads = k0.shape[2]
        self.scales = ([(torch.ones(num_slots, heads), torch.ones(num_slots, heads)) for _ in kv_caches]
                       if kind == "int8" else None)
        self.nbytes = sum(t.numel() * t.element_size() for pair in self.data for t in pair)
        self.nbytes += sum(t.numel() * 4 for pair in self.scales for t in pair) if self.scales else 0
        self.save_seconds = 0.0  # time spent copying blocks into the store
        self.fused = use_cpp(k0.device) and (self.dtype == k0.dtype or k0.dtype == torch.float32
                                             or (k0.dtype == torch.bfloat16 and self.dtype == torch.int8))
        self._flat_pool = [t for pair in kv_caches for t in pair]
        self._flat_store = [t for pair in self.data for t in pair]
        self._flat_scales = [t for pair in self.scales for t in pair] if self.scales else []
        self.load_seconds = 0.0  # and back into the pool

    def apply(self, copies: Sequence[KVCopy]) -> None:
        """Perform the listed copies in order, a run of saves or loads at a time (timed per kind)."""
        i = 0
        while i < len(copies):
            kind = copies[i][0]
            j = i
            while j < len(copies) and copies[j][0] == kind:
                j += 1
            t0 = time.perf_counter()
            if kind == SAVE:
                self._save([c[1] for c in copies[i:j]], [c[2] for c in copies[i:j]])
                self.save_seconds += time.perf_counter() - t0
            else:
                self._load([c[1] for c in copies[i:j]], [c[2] for c in copies[i:j]])
                self.load_seconds += time.perf_counter() - t0
            i = j

    def _save(self, blocks: list[int], slots: list[int]) -> None:
        last = {s: b for b, s in zip(blocks, slots, strict=True)}  # a slot written twice: the last wins
        if self.fused:
            ops().kv_tier_copy(self._flat_pool, self._flat_store, self._flat_scales,
                                                list(last.values()), list(last), True)
            return
        device = self.kv_caches[0][0].device
        src = torch.tensor(list(last.values()), dtype=torch.int64, device=device)
        dst = torch.tensor(list(last), dtype=torch.int64)
        with torch.inference_mode():
            for layer, caches in enumerate(self.kv_caches):
                for part in (0, 1):
                    kv = caches[part].index_select(0, src).to("cpu")
                    if self.scales is not None:
                        kv, scale = _quantize(kv)
                        self.scales[layer][part].index_copy_(0, dst, scale)
                    self.data[layer][part].index_copy_(0, dst, kv.to(self.dtype))

    def _load(self, slots: list[int], blocks: list[int]) -> None:
        last = {b: s for s, b in zip(slots, blocks, strict=True)}
        if self.fused:
            ops().kv_tier_copy(self._flat_pool, self._flat_store, self._flat_scales,
                                                list(last.values()), list(last), False)
            return
        device = self.kv_caches[0][0].device
        src = torch.tensor(list(last.values()), dtype=torch.int64)
        dst = torch.tensor(list(last), dtype=torch.int64, device=device)
        with torch.inference_mode():
            for layer, caches in enumerate(self.kv_caches):
                for part in (0, 1):
                    kv = self.data[layer][part].index_select(0, src)
                    if self.scales is not None:
                        kv = kv.float() * self.scales[layer][part].index_select(0, src)[:, None, :, None]
                    kv = kv.to(device=device, dtype=self.pool_dtype)
                    caches[part].index_copy_(0, dst, kv)


def _quantize(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per (block, head): ``kv ~= q * scale``; ``kv`` is ``[n, block_size, heads, dim]``."""
    absmax = kv.float().abs().amax(dim=(1, 3)).clamp_min(1e-8)  # [n, heads]
    scale = absmax / 127.0
    q = torch.round(kv.float() / scale[:, None, :, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale
