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
- Jobs are taken soonest expected return first; the return times are read from the job's record (its
  estimate's forecast, ``JobEstimate.expected_return``: the estimator that keeps it answers, as of the
  step's ``now``) only for jobs whose last answer is due within the horizon (or unknown), at most once
  per step each; a job without an estimate is expected back never.
- What it knows of a job is on the job's record (``return_due``, ``prefetch_done``), asked afresh
  whenever a turn of the job arrives or ends or the job is released (the job table tells it); a job
  that ended, or never had a turn here, is never prefetched nor asked about.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scheduler.block_pool import KVCacheBlock
from scheduler.job_record import JobRecord
from scheduler.job_table import JobListener
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.kv_tier import KVTier

if TYPE_CHECKING:
    from scheduler.request import Request

__all__ = ["Prefetcher"]


class Prefetcher(JobListener):
    """Decides, once per step, which tier-held jobs to move back into the pool (module docstring)."""

    def __init__(self, kv: KVCacheManager, horizon: float) -> None:
        if kv.tier is None:
            raise ValueError("prefetch needs a second KV tier")
        if not horizon > 0:
            raise ValueError("the prefetch horizon must be > 0 seconds")
        self.kv, self.horizon = kv, horizon
        self.tier: KVTier = kv.tier
        self.jobs = kv.tier.jobs

    # ---- what the job table tells the prefetcher (a turn arrived or ended, the job was released) --
    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        self._ask_afresh(record)

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self._ask_afresh(record)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self._ask_afresh(record)

    @staticmethod
    def _ask_afresh(record: JobRecord) -> None:
        record.return_due = None
        record.prefetch_done = False

    @staticmethod
    def _expected_return(record: JobRecord, now: float) -> float:
        """When the job is expected back, as its record's estimate says (inf: unknown)."""
        answer = None if record.estimate is None else record.estimate.expected_return(now)
        return math.inf if answer is None else answer

    @staticmethod
    def _known(record: JobRecord) -> bool:
        """A job with a turn here that has not ended: the only kind asked about and prefetched."""
        return record.last_active is not None and not record.ended

    def step(self, now: float, num_running: int) -> int:
        """Prefetch the jobs due within the horizon, soonest first, while the pool has room worth less;
        returns the blocks moved."""
        moved = 0
        for due, job, record in sorted(self._due_jobs(now), key=lambda d: (d[0], d[1])):
            assert record.tier is not None
            room = self._room(job, due, len(record.tier.hashes), num_running, now)
            if room is None:
                break  # a later job would find no more room
            self.kv.prefetch(job, room)
            record.prefetch_done = True
            moved += len(room)
        return moved

    def _room(self, job: str, due: float, n: int, reserve: int, now: float) -> list[KVCacheBlock] | None:
        """``n`` free blocks from the LRU head worth less than ``job`` due at ``due``, with ``reserve``
        more such blocks behind them; None when there are not that many before one worth more."""
        picked: list[KVCacheBlock] = []
        for b in self.kv.pool.free_from_head():
            if b.block_hash is not None and b.owner == job:
                continue
            if b.block_hash is not None and not self._worth_less(b.owner, due, now):
                break
            picked.append(b)
            if len(picked) == n + reserve:
                return picked[:n]
        return None

    def _worth_less(self, owner: str | None, due: float, now: float) -> bool:
        """Whether a cached block of ``owner`` is worth less than a block of a job due at ``due``."""
        if owner is None:
            return True
        record = self.jobs.get(owner)
        if record is None:
            return False  # a job this engine knows nothing of: never displaced for a prefetch
        if record.ended:
            return True
        later = record.return_due
        if later is None and self._known(record):
            later = record.return_due = self._expected_return(record, now)
        return later is not None and later != math.inf and later > due + self.horizon

    def _due_jobs(self, now: float) -> list[tuple[float, str, JobRecord]]:
        """(expected return, job, its record) of the tier's jobs expected back by ``now + horizon``."""
        limit = now + self.horizon
        out = []
        for residency in self.tier.residents:
            record = residency.record
            if record is None or record.prefetch_done or not self._known(record):
                continue
            due = record.return_due
            if due is None or due <= limit:  # unknown, or due: ask again (the residual moves on)
                due = record.return_due = self._expected_return(record, now)
            if due <= limit:
                out.append((due, record.job_id, record))
        return out
