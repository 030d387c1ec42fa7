"""Chained block hashing: a full block's hash covers its parent's hash, its tokens and extra keys.

``H(parent, tokens, extra) = SHA-256(parent digest | tokens as little-endian int64 | extra keys)``,
returned as a 256-bit int. SHA-256 (not Python's ``hash``) because the prefix cache is shared between
requests, and between tenants where configured: a collision would serve one prompt another's KV, and a
cheap-to-collide hash is a timing side channel across tenants. The chain's root is a fixed domain tag;
a request's ``cache_salt`` (which the server derives from the tenant and the client's own
``cache_salt``) enters the first block's extra keys, so two salts never share a block.

Invariants: equal hashes imply equal whole prefix chains, salts included (up to SHA-256 collisions);
the hash is deterministic across processes and machines; extra keys are strings, ints or None.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

_ROOT = hashlib.sha256(b"agent-engine block-hash chain v1").digest()
_SEP = b"\x1f"


def hash_block_tokens(parent_hash: int | None, tokens: Sequence[int], extra_keys: tuple | None = None) -> int:
    """Hash of one full block given its parent's hash (None for the first block)."""
    h = hashlib.sha256(_ROOT if parent_hash is None else parent_hash.to_bytes(32, "little"))
    h.update(array("q", tokens).tobytes())
    if extra_keys:
        for key in extra_keys:
            h.update(_SEP + repr(key).encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "little")
