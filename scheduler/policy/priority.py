"""PRIORITY: lower ``priority`` values first, then arrival order (a preempted request gets no boost);
the victim is the running request with the highest priority value, the latest arrival among ties."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.policy.base import NoPinsPolicy
from scheduler.request import Request


class PriorityPolicy(NoPinsPolicy):
    name = "priority"

    def waiting_key(self, req: Request) -> tuple:
        return (req.priority, req.arrival_time)

    def pick_victim(self, running: Sequence[Request]) -> Request:
        return max(running, key=lambda r: (r.priority, r.arrival_time))
