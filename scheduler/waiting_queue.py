"""The waiting queue, ordered by a policy key.

FCFS: preempted requests first, then arrival order. PRIORITY: (priority, arrival) with lower
priority values served first. CONTINUUM: preempted first, then turns of jobs holding a live pin,
then program-level FCFS (the job's first arrival), then the turn's arrival.
The list is re-sorted lazily, only when something changed (insertion or the pin table's version).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from scheduler.config import SchedulingPolicy
from scheduler.request import Request, RequestStatus


class WaitingQueue:
    def __init__(self, policy: SchedulingPolicy, has_pin: Callable[[str | None], bool]) -> None:
        self.policy = policy
        self._has_pin = has_pin
        self._items: list[Request] = []
        self._seq: dict[str, int] = {}
        self._counter = itertools.count()
        self._dirty = False
        self._pin_version = -1

    def key(self, r: Request) -> tuple:
        seq = self._seq[r.request_id]
        if self.policy is SchedulingPolicy.PRIORITY:
            return (r.priority, r.arrival_time, seq)
        preempted = r.status is not RequestStatus.PREEMPTED
        if self.policy is SchedulingPolicy.FCFS:
            return (preempted, r.arrival_time, seq)
        return (preempted, not self._has_pin(r.job_id), r.job_arrival_time, r.arrival_time, seq)

    def add(self, r: Request) -> None:
        if r.request_id not in self._seq:
            self._seq[r.request_id] = next(self._counter)
        self._items.append(r)
        self._dirty = True

    def order(self, pin_version: int = 0) -> None:
        """Sort if an insertion or a pin change could have changed the order."""
        if self._dirty or (self.policy is SchedulingPolicy.CONTINUUM and pin_version != self._pin_version):
            self._items.sort(key=self.key)
            self._dirty = False
            self._pin_version = pin_version

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
