"""The request routers living in this process, by deployment name (the ingress reads their counters and view).

Ray Serve ships a custom router class by value (cloudpickle), so the router module's own globals
are a copy in every process; this module is imported by reference and so is the one place a router
and the ingress of one process share.

Invariant: weak references only: a router that Ray drops disappears from here with it.
"""

from __future__ import annotations

import weakref
from typing import Any

_ROUTERS: dict[str, weakref.WeakSet[Any]] = {}


def register(deployment: str, router: Any) -> None:
    """Record ``router`` as one of ``deployment``'s routers in this process."""
    _ROUTERS.setdefault(deployment, weakref.WeakSet()).add(router)


def routers_of(deployment: str) -> list[Any]:
    """The live routers of ``deployment`` in this process."""
    return list(_ROUTERS.get(deployment, ()))
