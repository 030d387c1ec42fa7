"""Prefetch from the second tier: a demoted job's blocks go back up before its tool is predicted to return.

A job whose blocks wait in the tier pays their load when its next turn is admitted. When the
estimator expects that turn within ``horizon`` seconds and the pool has empty blocks to spare, the
scheduler moves the job's entries up ahead of time (``KVCacheManager.prefetch``, copies of kind
``PREFETCH``), so the turn finds them in the pool and its admission carries no load. On a GPU these
copies can run beside the compute stream; the simulator charges them only past the step they overlap.

Invariants:
- Prefetch runs only when nothing waits (every arrived turn was admitted: the pool's spare room
  belongs to no one). It takes free blocks from the head of the pool's LRU queue, as the next
  allocation would, but only while they are worth less than the job moved up: empty, job-less, of a
  job that ended, or of a job expected back later than ``horizon`` after it (the job's own blocks are
  stepped over); it stops at the first block worth more. One such block per running request is
  left over, so running work grows into blocks no more valuable than before.
- A job is prefetched at most once per pending turn: if its blocks are evicted again before the turn
  arrives, they are demoted as usual and wait for the lookup (no ping-pong between the tiers).
- Jobs are taken soonest expected return first; the return times are asked of ``return_time``
  only for jobs whose last answer is due within the horizon (or unknown), at most once per step each.
- Memory is bounded: jobs are forgotten when their turn arrives or they end, and past ``MAX_JOBS``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

from scheduler.block_pool import KVCacheBlock
from scheduler.kv_cache_manager import KVCacheManager

__all__ = ["MAX_JOBS", "Prefetcher", "ReturnTimeFn"]

# (job id, tenant) -> when the job's pending turn is expected back (clock time), None if unknown.
ReturnTimeFn = Callable[[str, "str | None"], "float | None"]
MAX_JOBS = 65536


class Prefetcher:
    """Decides, once per step, which tier-held jobs to move back into the pool (module docstring)."""

    def __init__(self, kv: KVCacheManager, return_time: ReturnTimeFn, horizon: float) -> None:
        if kv.tier is None:
            raise ValueError("prefetch needs a second KV tier")
        if not horizon > 0:
            raise ValueError("the prefetch horizon must be > 0 seconds")
        self.kv, self.return_time, self.horizon = kv, return_time, horizon
        self.tenants: OrderedDict[str, str | None] = OrderedDict()  # job -> tenant (its estimator)
        self.due: dict[str, float] = {}  # job -> expected return, as last asked
        self.done: set[str] = set()  # jobs prefetched for their pending turn

    def job_active(self, job_id: str | None, tenant: str | None) -> None:
        """A turn of ``job_id`` arrived or finished: its expected return is asked afresh."""
        if job_id is None:
            return
        self.tenants.pop(job_id, None)
        self.tenants[job_id] = tenant
        self.due.pop(job_id, None)
        self.done.discard(job_id)
        while len(self.tenants) > MAX_JOBS:
            self.forget(next(iter(self.tenants)))

    def forget(self, job_id: str | None) -> None:
        """``job_id`` ended: nothing more to prefetch for it."""
        if job_id is not None:
            self.tenants.pop(job_id, None)
            self.due.pop(job_id, None)
            self.done.discard(job_id)

    def step(self, now: float, num_running: int) -> int:
        """Prefetch the jobs due within the horizon, soonest first, while the pool has room worth less;
        returns the blocks moved."""
        tier = self.kv.tier
        assert tier is not None
        moved = 0
        for due, job in sorted(self._due_jobs(now)):
            room = self._room(job, due, len(tier.by_job[job]), num_running)
            if room is None:
                break  # a later job would find no more room
            self.kv.prefetch(job, room)
            self.done.add(job)
            moved += len(room)
        return moved

    def _room(self, job: str, due: float, n: int, reserve: int) -> list[KVCacheBlock] | None:
        """``n`` free blocks from the LRU head worth less than ``job`` due at ``due``, with ``reserve``
        more such blocks behind them; None when there are not that many before one worth more."""
        picked: list[KVCacheBlock] = []
        for b in self.kv.pool.free_from_head():
            if b.block_hash is not None and b.owner == job:
                continue
            if b.block_hash is not None and not self._worth_less(b.owner, due):
                break
            picked.append(b)
            if len(picked) == n + reserve:
                return picked[:n]
        return None

    def _worth_less(self, owner: str | None, due: float) -> bool:
        """Whether a cached block of ``owner`` is worth less than a block of a job due at ``due``."""
        if owner is None or self.kv.tier.job_is_done(owner):  # type: ignore[union-attr]
            return True
        later = self.due.get(owner)
        if later is None and owner in self.tenants:
            answer = self.return_time(owner, self.tenants[owner])
            later = self.due[owner] = math.inf if answer is None else answer
        return later is not None and later != math.inf and later > due + self.horizon

    def _due_jobs(self, now: float) -> list[tuple[float, str]]:
        """(expected return, job) of the tier's jobs expected back by ``now + horizon``."""
        limit = now + self.horizon
        out = []
        for job in self.kv.tier.by_job:  # type: ignore[union-attr]
            if job is None or job in self.done or job not in self.tenants:
                continue
            due = self.due.get(job)
            if due is None or due <= limit:  # unknown, or due: ask again (the residual moves on)
                answer = self.return_time(job, self.tenants[job])
                due = self.due[job] = math.inf if answer is None else answer
            if due <= limit:
                out.append((due, job))
        return out
