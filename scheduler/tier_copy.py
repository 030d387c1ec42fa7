"""The second KV tier's copy vocabulary: what one copy moves, the forms a copied block takes, and how
many blocks a tier of so many bytes holds.

The scheduler's index of the tier (``scheduler.kv_tier``) lists copies in ``SchedulerOutput.kv_copies``;
a runner's store (``kernels.kv_offload``) performs them. Both sides, the engine's config and the
simulator read these names from here, the lowest layer, so no side imports the other's machinery:

- ``(SAVE, pool block, tier slot)``: a block evicted from the pool moves down;
- ``(LOAD, tier slot, pool block)``: a lookup needs the block now;
- ``(PREFETCH, tier slot, pool block)``: the same move, ahead of its job's predicted return.

Invariants: a block's size in a form (``store_block_bytes``) is the store's real footprint per slot
(``HostKVStore.nbytes == num_slots * store_block_bytes(...)``); ``tier_blocks`` is the one conversion
of a byte budget into whole blocks, and in the ``auto`` form a block takes exactly its pool bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LOAD", "LOADS", "OFFLOAD_DTYPES", "PREFETCH", "SAVE", "KVBlockShape", "KVCopy",
           "store_block_bytes", "tier_blocks"]

SAVE = 0
LOAD = 1
PREFETCH = 2
LOADS = (LOAD, PREFETCH)
KVCopy = tuple[int, int, int]  # (kind, source, destination): see the module docstring

# How a store may hold the tier's blocks: the pool's dtype (lossless), bfloat16, or int8 with one
# float32 scale per (layer, K or V, KV head) of a block.
OFFLOAD_DTYPES = ("auto", "bfloat16", "int8")
_FORM_ITEMSIZE = {"bfloat16": 2, "int8": 1}
_SCALE_BYTES = 4


@dataclass(frozen=True)
class KVBlockShape:
    """One pool block as the tier sees it: ``nbytes`` over all layers, K and V, in elements of
    ``itemsize`` bytes, of a model with ``num_layers`` layers and ``num_kv_heads`` KV heads.
    ``nbytes`` may be fractional where it is a GPU's share of a tensor-parallel block (the simulator's)."""

    nbytes: float
    itemsize: int
    num_layers: int
    num_kv_heads: int


def store_block_bytes(block: KVBlockShape, form: str) -> float:
    """Bytes one block takes in the tier in ``form`` (one of ``OFFLOAD_DTYPES``), scales included."""
    if form not in OFFLOAD_DTYPES:
        raise ValueError(f"kv offload dtype must be one of {OFFLOAD_DTYPES}, got {form!r}")
    if form == "auto":
        return block.nbytes
    stored = block.nbytes // block.itemsize * _FORM_ITEMSIZE[form]
    scales = 2 * block.num_layers * block.num_kv_heads * _SCALE_BYTES if form == "int8" else 0
    return stored + scales


def tier_blocks(num_bytes: int, block: KVBlockShape, form: str) -> int:
    """Whole blocks of ``block``'s shape that ``num_bytes`` hold in ``form`` (0 for 0 bytes).

    The form is the caller's to state: the engine passes its ``kv_offload_dtype``; a budget meant as
    more pool blocks (``+pool`` runs: the equal-memory reference) passes ``"auto"``."""
    return int(num_bytes // store_block_bytes(block, form))
