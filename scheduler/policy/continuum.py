"""CONTINUUM: program-level FCFS plus pin leases that keep a job's KV cache across its tool calls.

- Waiting order: preempted requests first, then turns of warm jobs (holding a lease, or blocks in
  the second tier), then program order (the job's first arrival), then the turn's arrival.
- Victim: a request of a job without a lease before one with, then the latest job, then the latest turn.
- A finished non-final turn is pinned for the TTL the estimator wrote on its job's record
  (``JobRecord.ttl``, told before the policy; 0 or no estimator: the scheduler frees its blocks); the
  job's next turn, admitted while the lease lives, takes the blocks back as prefix hits (a pin hit).
  A turn of an inferred job (no client hint) gets a wholly soft lease: the first to give way.
- A turn's program-order key (``Request.job_arrival_time``) is stamped at its arrival from its job's
  first arrival as the estimator wrote it on the record (kept as given when the estimator counts none).
- Pressure on a running request: soft tails of other jobs give way first, then whole leases (the job
  expected back latest first), and only then is a request preempted.
- Blocked admission: the turn takes soft tails of jobs later in program order, and only if that is
  enough to admit it (no tail is given up for nothing); with nothing running it takes any soft tail,
  then any lease (pins never make an admission wait forever: nothing else would free blocks).
The lease state machine and its invariants are in ``scheduler.policy.leases``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduler.block_pool import KVCacheBlock
from scheduler.job_record import JobRecord
from scheduler.job_table import JobTable
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy.base import PinStats, SchedulingPolicy
from scheduler.policy.lease import EndReason
from scheduler.policy.leases import LeaseTable
from scheduler.request import Request, RequestStatus

if TYPE_CHECKING:
    from scheduler.config import SchedulerConfig


class ContinuumPolicy(SchedulingPolicy):
    name = "continuum"
    uses_pins = True

    def __init__(self, config: SchedulerConfig, kv: KVCacheManager, jobs: JobTable) -> None:
        super().__init__(config, kv, jobs)
        self.tier = kv.tier  # a job with blocks in the second tier waits like a pinned one
        max_pinned = int(config.max_pinned_fraction * (config.num_blocks - 1))
        self.leases = LeaseTable(max_pinned, kv.free_block_list, soft=config.soft_pins,
                                 soft_grace=config.soft_pin_grace,
                                 max_pinned_blocks_per_tenant=int(config.max_pinned_fraction_per_tenant * max_pinned),
                                 jobs=jobs)

    def holds_job(self, job_id: str) -> bool:
        return self.leases.has_lease(job_id)

    # ---- order ---------------------------------------------------------------------------------
    def waiting_key(self, req: Request) -> tuple:
        warm = self.leases.has_lease(req.job_id) or (self.tier is not None and self.tier.holds_job(req.job_id))
        return (req.status is not RequestStatus.PREEMPTED, not warm, req.job_arrival_time, req.arrival_time)

    def state_version(self) -> int:
        return self.leases.version + (self.tier.version if self.tier is not None else 0)

    def pick_victim(self, running: Sequence[Request]) -> Request:
        has_lease = self.leases.has_lease
        return max(running, key=lambda r: (not has_lease(r.job_id), r.job_arrival_time, r.arrival_time))

    # ---- job events (from the job table, after the estimator) -----------------------------------
    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        if record.first_arrival is not None:
            request.job_arrival_time = record.first_arrival  # program order: the job's first arrival
        self.leases.mark_job_returned(record.job_id)  # the job is back: its lease stops expiring

    def on_job_admitted(self, record: JobRecord, request: Request, now: float) -> None:
        # The job is back: its prefix hit holds its own references now.
        if self.leases.end(record.job_id, now, EndReason.HIT):
            request.pin_hit = True

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        if request.is_last_step or record.ttl <= 0 or request.request_id not in self.kv.req_blocks:
            return  # the scheduler frees its blocks
        # The lease table takes the blocks over: it keeps the prefix it pins and frees the rest.
        self.leases.pin(record.job_id, request.request_id, self.kv.take_blocks(request.request_id), record.ttl,
                        now, job_arrival_time=request.job_arrival_time,
                        hard=not request.job_inferred or request.job_confirmed, tenant=request.tenant)
        request.pinned = self.leases.has_lease(record.job_id)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        self.leases.end(record.job_id, now, EndReason.ABORTED)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self.leases.end(record.job_id, now, EndReason.RELEASED)

    # ---- memory pressure and time --------------------------------------------------------------
    def on_allocation_failed(self, req: Request, now: float) -> bool:
        leases = self.leases
        return bool(leases.leases) and (
            leases.yield_soft_tail(now, exclude_job=req.job_id)
            or leases.early_release_latest(now, exclude_job=req.job_id)
        )

    def on_admission_blocked(
        self, req: Request, num_new: int, hits: Sequence[KVCacheBlock], anything_running: bool, now: float
    ) -> bool:
        leases = self.leases
        if leases.num_soft_blocks:
            # Program order: while the engine is busy a turn never takes an earlier job's tail (that job
            # is coming back to a cache kept for it).
            after = req.job_arrival_time if anything_running else None
            if not anything_running or (
                self.kv.blocks_short(req, num_new, hits) <= leases.soft_blocks_yieldable(after, req.job_id)
            ):
                if leases.yield_soft_tail(now, exclude_job=req.job_id, after_job_arrival=after):
                    return True
        if anything_running or not leases.leases:
            return False
        # Nothing of the asking tenant runs: its own pins give way first (another tenant's running work
        # is no reason for a tenant's turns to wait behind its own pins, nor for it to take others').
        return (leases.early_release_latest(now, exclude_job=req.job_id, tenant=req.tenant)
                or leases.early_release_latest(now, exclude_job=req.job_id)
                or leases.end(req.job_id, now, EndReason.EARLY_RELEASE))

    def on_time(self, now: float) -> None:
        if self.leases.leases:
            self.leases.sweep(now)

    # ---- observability -------------------------------------------------------------------------
    def holds_leases(self) -> bool:
        return bool(self.leases.leases)

    def stats(self, now: float) -> PinStats:
        t = self.leases
        hard, soft = t.distinct_blocks()
        return PinStats(hard, soft, sorted(t.leases), t.counters.as_dict(),
                        t.pinned_block_seconds(now), t.soft_block_seconds(now), t.num_pinned_blocks)
