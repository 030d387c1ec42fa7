"""Tenant shares of the KV pool: when several tenants want blocks, none may crowd the others out.

Every tenant with a running or waiting request is active; each active tenant's share is an equal part
of the pool's usable blocks. A tenant holding more than its share (in its running requests' blocks)
is over it. The scheduler asks two things, and only when an allocation failed:

- ``victim``: when a request of a tenant within its share needs blocks, the running request to preempt
  is taken from the tenant furthest over its share (the policy picks which of that tenant's requests),
  never from the asking tenant;
- ``candidate``: when the head of the waiting queue is blocked, the first waiting request of a tenant
  within its share may be admitted past it, preempting over-share tenants' requests to make room,
  provided the request at its longest (prompt plus ``max_tokens``) keeps its tenant within the share
  and the over-share requests hold enough blocks (else nothing is preempted). So a request admitted
  this way never puts its tenant over, and two tenants never preempt each other back and forth.

Invariants: with one active tenant (every request of the default tenant, as in every simulation and
trace replay) ``of`` returns None and the scheduler behaves exactly as without tenants; a tenant is
only ever preempted for fairness while it is over its share; pinned blocks (leases) are not counted
here (their per-tenant cap lives in the lease table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.request import Request

__all__ = ["TenantShares"]


@dataclass(frozen=True)
class TenantShares:
    """Blocks held per active tenant against an equal share of ``usable`` blocks."""

    held: Mapping[str | None, int]
    share: float

    @classmethod
    def of(cls, running: Sequence[Request], waiting: Iterable[Request], block_ids: Mapping[str, list[int]],
           usable: int) -> TenantShares | None:
        """The shares now, or None while at most one tenant is active (fairness has nothing to do)."""
        held: dict[str | None, int] = {}
        for r in running:
            held[r.tenant] = held.get(r.tenant, 0) + len(block_ids.get(r.request_id, ()))
        for r in waiting:
            held.setdefault(r.tenant, 0)
        if len(held) <= 1:
            return None
        return cls(held, usable / len(held))

    def over(self, tenant: str | None) -> bool:
        return self.held.get(tenant, 0) > self.share

    def victim(self, running: Sequence[Request], asking: str | None,
               pick: Callable[[Sequence[Request]], Request]) -> Request | None:
        """A running request of the tenant furthest over its share (``pick`` chooses among its
        requests), or None when ``asking`` is over its own share or no other tenant is over."""
        if self.over(asking):
            return None
        over = [(held - self.share, t) for t, held in self.held.items() if t != asking and held > self.share]
        if not over:
            return None
        tenant = max(over, key=lambda x: x[0])[1]
        theirs = [r for r in running if r.tenant == tenant]
        return pick(theirs) if theirs else None

    def candidate(self, waiting: Iterable[Request]) -> Request | None:
        """The first waiting request (queue order) of a tenant within its share, if some tenant is over."""
        if not any(self.over(t) for t in self.held):
            return None
        return next((r for r in waiting if not self.over(r.tenant)), None)

