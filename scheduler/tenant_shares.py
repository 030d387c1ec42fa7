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
from typing import Any

from scheduler.request import Request

__all__ = ["TenantFairness", "TenantShares"]


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


class TenantFairness:
    """The scheduler's side of tenant shares (``Scheduler`` inherits it). It reads the scheduler's
    ``running``, ``waiting``, ``kv``, ``config``, ``policy``, ``admission_memo`` and ``_tenant_requests``
    (unfinished requests per tenant), and calls its ``_preempt_in_step`` and ``_admit``. Every method
    is a no-op answer (None / False / ``bool(running)``) while at most one tenant has requests."""

    running: list[Request]
    waiting: Any
    kv: Any
    config: Any
    policy: Any
    admission_memo: Any
    _tenant_requests: dict[str | None, int]

    def _preempt_in_step(self, step: Any, victim: Request) -> None:  # pragma: no cover - the scheduler's
        raise NotImplementedError

    def _admit(self, step: Any, req: Request, num_hit: int, num_new: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def _shares(self) -> TenantShares | None:
        if len(self._tenant_requests) <= 1:  # one tenant (every simulation): no work, no change
            return None
        return TenantShares.of(self.running, self.waiting, self.kv.req_block_ids, self.kv.pool.num_blocks - 1)

    def _running_for(self, req: Request) -> bool:
        """Whether anything that will free blocks for ``req`` runs: any request with one tenant; with
        several, one of ``req``'s own tenant (another tenant's long requests are no reason to wait)."""
        if len(self._tenant_requests) <= 1:
            return bool(self.running)
        return any(r.tenant == req.tenant for r in self.running)

    def _fair_victim(self, tenant: str | None, running: list[Request]) -> Request | None:
        shares = self._shares()
        return shares.victim(running, tenant, self.policy.pick_victim) if shares is not None else None

    def _admit_past_blocked(self, step: Any) -> bool:
        """With the queue's head blocked for blocks: admit the first waiting request of a tenant within
        its share, preempting over-share tenants' running requests (none admitted in this step) to
        make room. False (nothing changed but those preemptions) when there is none or it cannot fit."""
        shares = self._shares()
        cand = shares.candidate(self.waiting) if shares is not None else None
        if cand is None:
            return False
        hits, num_hit = self.kv.get_computed_blocks(cand)
        threshold = self.config.long_prefill_token_threshold or cand.num_tokens
        num_new = min(cand.num_tokens - num_hit, threshold, step.budget)
        blocks = -(-(num_hit + num_new) // self.config.block_size)
        whole = -(-min(cand.length_limit, self.config.max_model_len) // self.config.block_size)
        if shares.held.get(cand.tenant, 0) + whole > shares.share:
            return False  # at its longest it would put its tenant over: no preemption on its behalf
        admitted_now = set(step.new_ids) | set(step.resumed_ids)
        running = [r for r in self.running if r.request_id not in admitted_now]
        reclaimable = sum(len(self.kv.req_block_ids.get(r.request_id, ())) for r in running if shares.over(r.tenant))
        if self.kv.pool.num_free_blocks + reclaimable < blocks - len(hits):
            return False  # preempting every over-share request would not make room: preempt none
        while self.kv.allocate_slots(cand, num_new, hits) is None:
            running = [r for r in self.running if r.request_id not in admitted_now]
            victim = self._fair_victim(cand.tenant, running)
            if victim is None:
                return False
            self._preempt_in_step(step, victim)
        self.waiting.remove(cand)
        self.waiting.order()
        self.admission_memo.clear()
        self._admit(step, cand, num_hit, min(num_new, step.budget))
        return True
