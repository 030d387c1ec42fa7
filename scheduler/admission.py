"""Admission: which waiting requests join the running batch this step, and what makes room for them.

``Admission`` is the part of ``Scheduler`` (which inherits it) that admits: waiting requests in
policy order until one does not fit after the policy had its say (``on_admission_blocked``), the token
budget or the seats run out; a head known to be still blocked (``BlockedAdmissionMemo``) is not
re-walked. No request skips a blocked head, but for tenant shares (``scheduler.tenant_shares``): with
several tenants active, a request of a tenant within its KV share may be admitted past it, over-share
tenants' requests preempted to make room. With one tenant (every simulation) that path answers at once
and nothing changes.

It works on the scheduler's ``running``, ``waiting``, ``requests``' tenants (``_tenant_requests``:
unfinished requests per tenant), ``kv``, ``config``, ``policy``, ``admission_memo``, ``num_steps`` and
``trace_sink``, calls its ``_preempt``, and publishes each admission of a job's turn on its job table
(``jobs.admit``: the policy hears it there, as every listener does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.block_pool import KVCacheBlock
from scheduler.observability import admit_event
from scheduler.request import Request, RequestStatus
from scheduler.step_io import ScheduledRequest
from scheduler.tenant_shares import TenantShares

if TYPE_CHECKING:
    from scheduler.admission_memo import BlockedAdmissionMemo
    from scheduler.config import SchedulerConfig
    from scheduler.job_table import JobTable
    from scheduler.kv_cache_manager import KVCacheManager
    from scheduler.policy import SchedulingPolicy
    from scheduler.waiting_queue import WaitingQueue

__all__ = ["Admission", "StepDraft"]


@dataclass
class StepDraft:
    """What one ``schedule()`` call decided so far."""

    now: float
    budget: int
    scheduled: dict[str, ScheduledRequest] = field(default_factory=dict)
    preempted: list[Request] = field(default_factory=list)
    new_ids: list[str] = field(default_factory=list)
    resumed_ids: list[str] = field(default_factory=list)


class Admission:
    """Admission and the tenant-share decisions (see the module docstring).

    The state it works on belongs to ``Scheduler``, which sets every attribute declared here."""

    config: SchedulerConfig
    kv: KVCacheManager
    policy: SchedulingPolicy
    jobs: JobTable
    waiting: WaitingQueue
    running: list[Request]
    admission_memo: BlockedAdmissionMemo
    num_steps: int
    trace_sink: Callable[[dict], None] | None
    _tenant_requests: dict[str | None, int]

    def _preempt(self, req: Request) -> None:
        """Move a running request back to waiting, its blocks freed (the scheduler's)."""
        raise NotImplementedError

    def _admit_waiting(self, step: StepDraft) -> None:
        """Admit waiting requests in policy order until one does not fit, the budget or the seats run out."""
        waiting = self.waiting
        threshold = self.config.long_prefill_token_threshold
        waiting.order()
        while len(waiting) and step.budget > 0 and len(self.running) < self.config.max_num_seqs:
            req = waiting.peek()
            if self.running and self.admission_memo.still_blocked(req, step.budget):
                if self._admit_past_blocked(step):
                    continue
                return
            hits, num_hit, num_load, num_new = self._plan(req, threshold, step.budget)
            if not self._allocate(req, hits, num_load, num_new):
                if self.policy.on_admission_blocked(req, num_load + num_new, hits, self._running_for(req), step.now):
                    continue
                self.admission_memo.record(req, hits, step.budget)
                if self._admit_past_blocked(step):
                    continue
                return
            self.admission_memo.clear()
            self._admit(step, waiting.pop(), num_hit + num_load, num_new, num_load)

    def _plan(self, req: Request, threshold: int, budget: int) -> tuple[list[KVCacheBlock], int, int, int]:
        """``(pool hits, their tokens, tokens to load from the second tier, tokens to compute now)``
        for admitting ``req``: loads cost blocks but no budget, the chunk is capped by both."""
        kv = self.kv
        hits, num_hit = kv.get_computed_blocks(req)
        num_load = kv.tier_hit_blocks(req, len(hits)) * kv.block_size
        num_new = req.num_tokens - num_hit - num_load
        if threshold:
            num_new = min(num_new, threshold)
        return hits, num_hit, num_load, min(num_new, budget)

    def _allocate(self, req: Request, hits: list[KVCacheBlock], num_load: int, num_new: int) -> bool:
        """Blocks for ``req``'s tier loads and first chunk after its ``hits``; the loads are listed.
        False (nothing changed) when the pool is short. The tier entries to load survive the
        evictions this allocation causes."""
        kv = self.kv
        first, count = len(hits), num_load // kv.block_size
        if not count:
            return kv.allocate_slots(req, num_new, hits) is not None
        with kv.tier.protecting(req.block_hashes[first:first + count]):  # type: ignore[union-attr]
            if kv.allocate_slots(req, num_load + num_new, hits) is None:
                return False
        kv.load_from_tier(req, first, count)
        return True

    def _preempt_in_step(self, step: StepDraft, victim: Request) -> None:
        """Preempt ``victim``; a chunk it was given earlier in this step goes back to the budget."""
        self._preempt(victim)
        step.preempted.append(victim)
        sr = step.scheduled.pop(victim.request_id, None)
        if sr is not None:
            step.budget += sr.num_scheduled_tokens

    def _admit(self, step: StepDraft, req: Request, num_hit: int, num_new: int, num_loaded: int = 0) -> None:
        """``req`` holds its hits (``num_loaded`` tokens of them being loaded from the second tier) and
        blocks for ``num_new`` tokens after them: it runs from now on."""
        resumed = req.status is RequestStatus.PREEMPTED
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = num_hit
        self.running.append(req)
        self.kv.record_prefix_query(req.num_tokens, num_hit)
        if req.num_cached_tokens < 0:
            req.num_cached_tokens = num_hit
            req.first_scheduled_time = step.now
        self.jobs.admit(req, step.now)
        (step.resumed_ids if resumed else step.new_ids).append(req.request_id)
        rid, toks, start = req.request_id, req.all_token_ids, req.num_computed_tokens
        end = start + num_new
        # The request's own view for as long as it holds these blocks (refreshed each step it runs).
        req.scheduled_view = step.scheduled[rid] = ScheduledRequest(
            rid, toks[start:end], start, self.kv.req_block_ids[rid], req.sampling_params, end == len(toks),
            len(req.output_token_ids), req.eos_token_id)
        step.budget -= num_new
        if self.trace_sink is not None:
            self.trace_sink(admit_event(self.num_steps, step.now, req, num_hit, resumed, num_loaded))

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

    def _admit_past_blocked(self, step: StepDraft) -> bool:
        """With the queue's head blocked for blocks: admit the first waiting request of a tenant within
        its share, preempting over-share tenants' running requests (none admitted in this step) to
        make room. False (nothing changed but those preemptions) when there is none or it cannot fit."""
        shares = self._shares()
        cand = shares.candidate(self.waiting) if shares is not None else None
        if cand is None:
            return False
        hits, num_hit, num_load, num_new = self._plan(cand, self.config.long_prefill_token_threshold, step.budget)
        blocks = -(-(num_hit + num_load + num_new) // self.config.block_size)
        whole = -(-min(cand.length_limit, self.config.max_model_len) // self.config.block_size)
        if shares.held.get(cand.tenant, 0) + whole > shares.share:
            return False  # at its longest it would put its tenant over: no preemption on its behalf
        admitted_now = set(step.new_ids) | set(step.resumed_ids)
        running = [r for r in self.running if r.request_id not in admitted_now]
        reclaimable = sum(len(self.kv.req_block_ids.get(r.request_id, ())) for r in running if shares.over(r.tenant))
        if self.kv.pool.num_free_blocks + reclaimable < blocks - len(hits):
            return False  # preempting every over-share request would not make room: preempt none
        while not self._allocate(cand, hits, num_load, num_new):
            running = [r for r in self.running if r.request_id not in admitted_now]
            victim = self._fair_victim(cand.tenant, running)
            if victim is None:
                return False
            self._preempt_in_step(step, victim)
        self.waiting.remove(cand)
        self.waiting.order()
        self.admission_memo.clear()
        self._admit(step, cand, num_hit + num_load, min(num_new, step.budget), num_load)
        return True
