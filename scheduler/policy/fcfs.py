"""FCFS: preempted requests first, then arrival order; the victim is the request admitted last."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.policy.base import NoPinsPolicy
from scheduler.request import Request, RequestStatus


class FcfsPolicy(NoPinsPolicy):
    name = "fcfs"

    def waiting_key(self, req: Request) -> tuple:
        return (req.status is not RequestStatus.PREEMPTED, req.arrival_time)

    def pick_victim(self, running: Sequence[Request]) -> Request:
        return running[-1]
