"""Prefix chains and the router-side prefix index: which replica has seen how much of a prompt.

``text_chain(text)`` hashes each whole ``chunk_chars`` chunk of a prompt, each hash chained on the
previous one, so two prompts share the first ``k`` hashes exactly when they share their first ``k``
chunks (a turn that extends the previous turn's prompt matches all of its chunks). The simulator
chains its real block hashes instead (``every`` k-th one); any hashable chain works.

``PrefixIndex`` remembers, per chain hash, the replicas a prompt with that prefix was routed to,
least recently used entries dropped first past ``max_entries``.

Invariants:
- Chains are deterministic across processes (SHA-256, never Python's salted ``hash``), so every
  ingress computes the same chain for the same prompt.
- A trailing partial chunk is never hashed (it may still grow), so a chain only names stable text.
- ``match`` returns, per replica, the longest prefix length (in chunks) it was routed; a replica
  that ``forget``s is never returned again until it is routed a prompt anew.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Sequence

DEFAULT_CHUNK_CHARS = 256
DEFAULT_MAX_ENTRIES = 200_000


def text_chain(text: str, chunk_chars: int = DEFAULT_CHUNK_CHARS,
               limit: int | None = None) -> tuple[str, ...]:
    """Chained SHA-256 (16 hex digits each) of every whole ``chunk_chars`` chunk of ``text``.

    ``limit`` caps the number of chunks hashed (the first ones)."""
    if chunk_chars <= 0:
        raise ValueError("chunk_chars must be positive")
    n = len(text) // chunk_chars
    if limit is not None:
        n = min(n, limit)
    out: list[str] = []
    prev = b""
    for i in range(n):
        chunk = text[i * chunk_chars:(i + 1) * chunk_chars].encode("utf-8", "surrogatepass")
        h = hashlib.sha256(prev + chunk)
        prev = h.digest()[:16]
        out.append(prev.hex())
    return tuple(out)


class PrefixIndex:
    """Chain hash -> replicas routed a prompt with that prefix (bounded, LRU)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, set[str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def insert(self, chain: Sequence[Hashable], replica_id: str) -> None:
        """Record that a prompt with ``chain`` went to ``replica_id``."""
        entries = self._entries
        for h in chain:
            owners = entries.get(h)
            if owners is None:
                entries[h] = {replica_id}
            else:
                owners.add(replica_id)
                entries.move_to_end(h)
        while len(entries) > self.max_entries:
            entries.popitem(last=False)

    def match(self, chain: Sequence[Hashable]) -> dict[str, int]:
        """Per replica, how many leading chunks of ``chain`` it was routed (replicas with none left out)."""
        found: dict[str, int] = {}
        entries = self._entries
        for i in range(len(chain) - 1, -1, -1):
            owners = entries.get(chain[i])
            if owners:
                for r in owners:
                    found.setdefault(r, i + 1)
        return found

    def forget(self, replica_id: str) -> None:
        """Drop ``replica_id`` from every entry (it died or left)."""
        empty = []
        for h, owners in self._entries.items():
            owners.discard(replica_id)
            if not owners:
                empty.append(h)
        for h in empty:
            del self._entries[h]
