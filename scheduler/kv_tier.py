"""The second KV tier: a bounded store of blocks evicted from the pool, keyed by their chained hash.

The scheduler owns the tier's index (hash -> slot) and decides every move; a runner owns the bytes
(slot -> KV) and performs the copies listed in ``SchedulerOutput.kv_copies`` (their vocabulary:
``scheduler.tier_copy``), in order, before the step's forward pass. A block moves down (``SAVE``:
pool block -> tier slot) when the pool evicts it for reuse, whether its lease expired or yielded, its
job was preempted, or it was merely cached-free;
it moves up (``LOAD``: tier slot -> pool block) when a prefix lookup misses the pool and hits the tier,
or ahead of its job's predicted return (``PREFETCH``, the same move off the critical path:
``scheduler.kv_prefetch``), into an empty pool block that stays cached-free until the job is back.

Which entries stay is job-aware: each entry remembers the job whose turn last used its block; a job
the client ended (or whose final turn finished) is worth nothing, and otherwise the job idle longest
(its last turn finished or arrived earliest) is the least likely to be back soon. A demotion that
would have to evict an entry of a job active more recently than its own is dropped instead.

Invariants:
- A hash is in the pool's cache map or in the tier, never both: a block moves down on eviction and
  up on load, and ``save`` refuses a hash the tier holds.
- Every entry leaves the tier exactly once, loaded or prefetched (``reloaded``; ``prefetched`` counts
  the part of those moved ahead of a return), evicted for room or as worthless
  (``dropped``) or by ``clear``; so ``stored == reloaded + dropped + cleared + len(entries)``.
- ``len(entries) + len(free_slots) == num_slots``; a slot holds at most one entry.
- Tenants never share an entry: the hash chain includes the request's cache salt, as in the pool.
- Copies are listed in the order they were decided, so a slot a load frees and a later save refills
  in the same step is read before it is written.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from itertools import islice

from scheduler.tier_copy import LOAD, PREFETCH, SAVE, KVCopy

__all__ = ["KVTier", "TierCounters", "TierEntry"]

_DONE = -math.inf  # the last-active time of a job that will not come back
MAX_JOBS = 65536  # jobs whose activity the tier remembers beyond those with entries


@dataclass
class TierEntry:
    slot: int
    job_id: str | None
    stored_at: float


@dataclass
class TierCounters:
    """Tier events in blocks; every stored entry leaves exactly once (see the module invariants)."""

    stored: int = 0  # demotions: blocks saved from the pool
    reloaded: int = 0  # blocks loaded back into the pool (hits in the tier, and prefetches)
    prefetched: int = 0  # the part of ``reloaded`` moved ahead of a predicted return
    dropped: int = 0  # entries evicted from the tier (for room, or their job ended)
    cleared: int = 0  # entries forgotten by ``clear``
    refused: int = 0  # evicted pool blocks not demoted (worthless, or every entry worth more)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class KVTier:
    """Index of the second tier: which block hash sits in which slot, and for which job."""

    def __init__(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError("a KV tier needs at least one slot")
        self.num_slots = num_slots
        self.free_slots = list(range(num_slots - 1, -1, -1))  # pop() hands out slot 0 first
        self.entries: dict[int, TierEntry] = {}
        self.by_job: dict[str | None, OrderedDict[int, None]] = {}  # job -> its hashes, oldest first
        self.last_active: dict[str, float] = {}  # job -> when its last turn arrived or finished
        self.copies: list[KVCopy] = []  # decided since the last ``take_copies``
        self.protected: frozenset[int] = frozenset()  # entries an admission is about to load
        self.prefetched_jobs: set[str] = set()  # jobs whose entries went up ahead of their next turn
        self.version = 0  # changes whenever ``holds_job`` may change its answer
        self.counters = TierCounters()

    # ---- what the scheduler tells the tier about jobs ----------------------------------------
    def job_active(self, job_id: str | None, now: float) -> None:
        """A turn of ``job_id`` arrived or finished: its entries are worth more than idler jobs'."""
        if job_id is not None:
            self.last_active.pop(job_id, None)  # re-inserted: the dict's order is the order of activity
            self.last_active[job_id] = now
            self._forget_old_jobs()
            self._unmark_prefetched(job_id)

    def job_done(self, job_id: str | None) -> None:
        """``job_id`` will not come back: its entries go first, and its blocks are no longer demoted."""
        if job_id is not None:
            self.last_active[job_id] = _DONE
            self._forget_old_jobs()
            self._unmark_prefetched(job_id)

    def _forget_old_jobs(self) -> None:
        """Bounded memory: past ``MAX_JOBS`` remembered jobs, the oldest ones without entries are forgotten."""
        extra = len(self.last_active) - MAX_JOBS
        if extra > 0:
            for job in [j for j in islice(self.last_active, 2 * extra) if j not in self.by_job][:extra]:
                del self.last_active[job]

    # ---- queries and moves ---------------------------------------------------------------------
    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self.entries

    def holds_job(self, job_id: str | None) -> bool:
        """Whether some of ``job_id``'s blocks wait here, or were prefetched for its next turn (its job
        is warm, like a pinned one)."""
        return job_id is not None and (job_id in self.by_job or job_id in self.prefetched_jobs)

    def job_is_done(self, job_id: str | None) -> bool:
        """Whether ``job_id`` will not come back (its final turn finished, or the client ended it)."""
        return job_id is not None and self.last_active.get(job_id) == _DONE

    def save(self, block_hash: int, block_id: int, job_id: str | None, now: float) -> bool:
        """The pool evicts ``block_id`` (holding ``block_hash``'s KV): demote it, or refuse (False)."""
        if block_hash in self.entries:
            return False
        worth = self._worth(job_id, now)
        if worth == _DONE or (not self.free_slots and not self._evict_below(worth)):
            self.counters.refused += 1
            return False
        slot = self.free_slots.pop()
        self.entries[block_hash] = TierEntry(slot, job_id, now)
        if job_id not in self.by_job:
            self.by_job[job_id] = OrderedDict()
            self.version += 1
        self.by_job[job_id][block_hash] = None
        self.copies.append((SAVE, block_id, slot))
        self.counters.stored += 1
        return True

    def load(self, block_hash: int, block_id: int, kind: int = LOAD) -> None:
        """Move ``block_hash``'s entry up into pool block ``block_id`` (``LOAD`` or ``PREFETCH``); the
        entry leaves the tier."""
        entry = self._remove(block_hash)
        self.copies.append((kind, entry.slot, block_id))
        self.free_slots.append(entry.slot)  # a later save may refill it: it comes after this copy
        self.counters.reloaded += 1
        if kind == PREFETCH:
            self.counters.prefetched += 1
            if entry.job_id is not None and entry.job_id not in self.prefetched_jobs:
                self.prefetched_jobs.add(entry.job_id)
                self.version += 1

    @contextmanager
    def protecting(self, hashes: Iterable[int]) -> Iterator[None]:
        """While the block: these entries are never evicted for room (an admission will load them)."""
        self.protected = frozenset(hashes)
        try:
            yield
        finally:
            self.protected = frozenset()

    def discard(self, block_hash: int) -> None:
        """The pool computed ``block_hash`` again: the tier's copy is redundant and leaves (dropped)."""
        if block_hash in self.entries:
            self.free_slots.append(self._remove(block_hash).slot)
            self.counters.dropped += 1

    def take_copies(self) -> list[KVCopy]:
        """The copies decided since the last call, in order (the step's ``kv_copies``)."""
        copies, self.copies = self.copies, []
        return copies

    def clear(self) -> None:
        """Forget every entry (the prefix cache was reset)."""
        self.counters.cleared += len(self.entries)
        for entry in self.entries.values():
            self.free_slots.append(entry.slot)
        self.entries.clear()
        self.by_job.clear()
        self.prefetched_jobs.clear()
        self.version += 1

    # ---- internals ---------------------------------------------------------------------------
    def _unmark_prefetched(self, job_id: str) -> None:
        """The job's turn arrived or finished: what was prefetched for it is an ordinary pool block now."""
        if job_id in self.prefetched_jobs:
            self.prefetched_jobs.discard(job_id)
            self.version += 1

    def _worth(self, job_id: str | None, stored_at: float) -> float:
        """An entry's worth: its job's last-active time (a job-less entry: when it was stored)."""
        if job_id is None:
            return stored_at
        return self.last_active.get(job_id, stored_at)

    def _evict_below(self, worth: float) -> bool:
        """Drop the oldest entry of the least valuable job, if that job is worth less than ``worth``."""
        victim, victim_worth = None, math.inf
        for job, hashes in self.by_job.items():
            oldest = next((h for h in hashes if h not in self.protected), None)
            if oldest is None:
                continue
            w = self._worth(job, self.entries[oldest].stored_at)
            if w < victim_worth:
                victim, victim_worth = oldest, w
        if victim is None or victim_worth >= worth:
            return False
        self.free_slots.append(self._remove(victim).slot)
        self.counters.dropped += 1
        return True

    def _remove(self, block_hash: int) -> TierEntry:
        entry = self.entries.pop(block_hash)
        hashes = self.by_job[entry.job_id]
        del hashes[block_hash]
        if not hashes:
            del self.by_job[entry.job_id]
            self.version += 1
        return entry
