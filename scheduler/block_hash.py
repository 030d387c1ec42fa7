"""Chained block hashing: a full block's hash covers its parent's hash, its tokens and extra keys.

``H(parent, tokens, extra)`` uses Python's tuple hash over ints (not randomised per process for
ints and tuples of ints/None; strings in ``extra`` are hashed per process, which is all a
prefix cache in one process needs). Two blocks share a hash only if their whole prefix chains,
salts included, are equal (up to 64-bit collisions).
"""

from __future__ import annotations

from collections.abc import Sequence

_NONE_PARENT = 0x5BD1E995


def hash_block_tokens(parent_hash: int | None, tokens: Sequence[int], extra_keys: tuple | None = None) -> int:
    """Hash of one full block given its parent's hash (None for the first block)."""
    return hash((_NONE_PARENT if parent_hash is None else parent_hash, tuple(tokens), extra_keys))
