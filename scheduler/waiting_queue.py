"""The waiting queue, ordered by a policy's key.

Invariants:
- A request is queued at most once; it keeps the insertion sequence number of its first ``add`` until
  ``forget``, so among equal keys a re-queued (preempted) request keeps its original place.
- After ``order()`` the queue is sorted by ``(key(r), seq(r))``. It is re-sorted lazily, only when an
  insertion happened or ``state_version()`` changed since the last sort (the policy's promise: its keys
  of queued requests change only together with that version).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from scheduler.request import Request


class WaitingQueue:
    def __init__(self, key: Callable[[Request], tuple], state_version: Callable[[], int]) -> None:
        self._key = key
        self._state_version = state_version
        self._items: list[Request] = []
        self._seq: dict[str, int] = {}
        self._counter = itertools.count()
        self._dirty = False
        self._sorted_at_version = -1

    def key(self, r: Request) -> tuple:
        return (*self._key(r), self._seq[r.request_id])

    def add(self, r: Request) -> None:
        if r.request_id not in self._seq:
            self._seq[r.request_id] = next(self._counter)
        self._items.append(r)
        self._dirty = True

    def order(self) -> None:
        """Sort if an insertion or a policy change could have changed the order."""
        version = self._state_version()
        if self._dirty or version != self._sorted_at_version:
            self._items.sort(key=self.key)
            self._dirty = False
            self._sorted_at_version = version

    def peek(self) -> Request:
        return self._items[0]

    def pop(self) -> Request:
        return self._items.pop(0)

    def remove(self, r: Request) -> None:
        self._items.remove(r)

    def forget(self, request_id: str) -> None:
        """Drop the arrival sequence number of a request that has finished."""
        self._seq.pop(request_id, None)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._items)

    def __contains__(self, r: Request) -> bool:
        return r in self._items
