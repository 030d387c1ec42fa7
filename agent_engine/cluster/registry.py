"""The request routers living in this process, by deployment name (the ingress reads their counters and view).

Ray Serve ships a custom router class by value (cloudpickle), so the router module's own globals
are a copy in every process; this module is imported by reference and so is the one place a router
and the ingress of one process share.

Invariant: weak references only: a router that Ray drops disappears from here with it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sized
from typing import Protocol

from agent_engine.json_types import JsonObject
from agent_engine.routing import RoutingCounters


class ClusterRouter(Protocol):
    """A request router as the ingress reads it: its counters, its live replicas, its view, and the
    job it forgets when the client releases it."""

    counters: RoutingCounters
    curr_replicas: Sized

    def view(self) -> JsonObject: ...

    def forget_job(self, job_id: str) -> None: ...


_ROUTERS: dict[str, weakref.WeakSet[ClusterRouter]] = {}


def register(deployment: str, router: ClusterRouter) -> None:
    """Record ``router`` as one of ``deployment``'s routers in this process."""
    _ROUTERS.setdefault(deployment, weakref.WeakSet()).add(router)


def routers_of(deployment: str) -> list[ClusterRouter]:
    """The live routers of ``deployment`` in this process."""
    return list(_ROUTERS.get(deployment, ()))
