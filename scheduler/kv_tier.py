"""The second KV tier: a bounded store of blocks evicted from the pool, keyed by their chained hash.

The scheduler owns the tier's index (hash -> slot) and decides every move; a runner owns the bytes
(slot -> KV) and performs the copies listed in ``SchedulerOutput.kv_copies`` (their vocabulary:
``scheduler.tier_copy``), in order, before the step's forward pass. A block moves down (``SAVE``:
pool block -> tier slot) when the pool evicts it for reuse, whether its lease expired or yielded, its
job was preempted, or it was merely cached-free;
it moves up (``LOAD``: tier slot -> pool block) when a prefix lookup misses the pool and hits the tier,
or ahead of its job's predicted return (``PREFETCH``, the same move off the critical path:
``scheduler.kv_prefetch``), into an empty pool block that stays cached-free until the job is back.

Which entries stay is job-aware: each entry remembers the job whose turn last used its block (its
``TierResidency`` on the job's ``JobRecord``); a job the client ended (or whose final turn finished) is
worth nothing, and otherwise the job idle longest (its last turn finished or arrived earliest: the
record's ``last_active``) is the least likely to be back soon. A demotion that would have to evict an
entry of a job active more recently than its own is dropped instead. The tier listens to the job table
(``scheduler.job_table``): a job's turn arriving or ending, or its release, makes what was prefetched
for it an ordinary pool block again.

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
- ``residents`` holds exactly the residencies with entries, in order of their first entry; a job's
  residency is its record's ``tier``, and ``prefetched`` indexes exactly the records marked prefetched.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from scheduler.job_record import JobRecord, TierResidency
from scheduler.job_table import JobListener, JobTable
from scheduler.tier_copy import LOAD, PREFETCH, SAVE, KVCopy

if TYPE_CHECKING:
    from scheduler.request import Request

__all__ = ["KVTier", "TierCounters", "TierEntry"]

_DONE = -math.inf  # the worth of an entry of a job that will not come back


@dataclass(slots=True)
class TierEntry:
    slot: int
    residency: TierResidency  # whose entry it is (its job's, or the tier's own for job-less blocks)
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


class KVTier(JobListener):
    """Index of the second tier: which block hash sits in which slot, and for which job."""

    def __init__(self, num_slots: int, jobs: JobTable | None = None) -> None:
        if num_slots < 1:
            raise ValueError("a KV tier needs at least one slot")
        self.num_slots = num_slots
        self.jobs = jobs if jobs is not None else JobTable()
        self.free_slots = list(range(num_slots - 1, -1, -1))  # pop() hands out slot 0 first
        self.entries: dict[int, TierEntry] = {}
        # Residencies with entries, in order of their first entry (an index of records' ``tier``).
        self.residents: dict[TierResidency, None] = {}
        self._jobless = TierResidency(None)  # entries of requests without a job
        self.prefetched: dict[JobRecord, None] = {}  # the records marked ``prefetched`` (an index)
        self.copies: list[KVCopy] = []  # decided since the last ``take_copies``
        self.protected: frozenset[int] = frozenset()  # entries an admission is about to load
        self.version = 0  # changes whenever ``holds_job`` may change its answer
        self.counters = TierCounters()

    # ---- what the job table tells the tier -----------------------------------------------------
    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        self._unmark_prefetched(record)

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self._unmark_prefetched(record)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self._unmark_prefetched(record)

    # ---- queries and moves ---------------------------------------------------------------------
    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self.entries

    def holds_job(self, job_id: str | None) -> bool:
        """Whether some of ``job_id``'s blocks wait here, or were prefetched for its next turn (its job
        is warm, like a pinned one)."""
        record = self.jobs.get(job_id)
        return record is not None and (record.tier is not None or record.prefetched)

    def entries_of(self, job_id: str) -> list[int]:
        """The hashes of ``job_id``'s entries, oldest first (empty when it has none)."""
        record = self.jobs.get(job_id)
        return [] if record is None or record.tier is None else list(record.tier.hashes)

    def held_job_ids(self) -> Iterator[str]:
        """Jobs with entries here or prefetched for their next turn (unordered; a job may repeat)."""
        yield from (res.record.job_id for res in self.residents if res.record is not None)
        yield from (record.job_id for record in self.prefetched)

    def save(self, block_hash: int, block_id: int, job_id: str | None, now: float) -> bool:
        """The pool evicts ``block_id`` (holding ``block_hash``'s KV): demote it, or refuse (False)."""
        if block_hash in self.entries:
            return False
        record = self.jobs.get(job_id)
        worth = self._worth(record, now)
        if worth == _DONE or (not self.free_slots and not self._evict_below(worth)):
            self.counters.refused += 1
            return False
        slot = self.free_slots.pop()
        residency = self._residency(record, job_id)
        self.entries[block_hash] = TierEntry(slot, residency, now)
        if not residency.hashes:
            self.residents[residency] = None
            if residency.record is not None:
                residency.record.tier = residency
            self.version += 1
        residency.hashes[block_hash] = None
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
            record = entry.residency.record
            if record is not None and not record.prefetched:
                record.prefetched = True
                self.prefetched[record] = None
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
        for residency in self.residents:
            residency.hashes.clear()
            if residency.record is not None:
                residency.record.tier = None
        self.residents.clear()
        for record in self.prefetched:
            record.prefetched = False
        self.prefetched.clear()
        self.version += 1

    # ---- internals ---------------------------------------------------------------------------
    def _unmark_prefetched(self, record: JobRecord) -> None:
        """The job's turn arrived or ended, or it was released: what was prefetched for it is an
        ordinary pool block now."""
        if record.prefetched:
            record.prefetched = False
            del self.prefetched[record]
            self.version += 1

    def _residency(self, record: JobRecord | None, job_id: str | None) -> TierResidency:
        """Where an entry of ``job_id`` goes: its record's residency (a record is made for a job the
        table does not know), or the tier's own for a block without a job."""
        if job_id is None:
            return self._jobless
        if record is None:
            record = self.jobs.record(job_id)
        return record.tier if record.tier is not None else TierResidency(record)

    @staticmethod
    def _worth(record: JobRecord | None, stored_at: float) -> float:
        """An entry's worth: its job's last-active time (an entry of no job, or of a job never active
        here: when it was stored); a job that ended is worth nothing."""
        if record is None:
            return stored_at
        if record.ended:
            return _DONE
        return stored_at if record.last_active is None else record.last_active

    def _evict_below(self, worth: float) -> bool:
        """Drop the oldest entry of the least valuable job, if that job is worth less than ``worth``."""
        victim, victim_worth = None, math.inf
        for residency in self.residents:
            oldest = next((h for h in residency.hashes if h not in self.protected), None)
            if oldest is None:
                continue
            w = self._worth(residency.record, self.entries[oldest].stored_at)
            if w < victim_worth:
                victim, victim_worth = oldest, w
        if victim is None or victim_worth >= worth:
            return False
        self.free_slots.append(self._remove(victim).slot)
        self.counters.dropped += 1
        return True

    def _remove(self, block_hash: int) -> TierEntry:
        entry = self.entries.pop(block_hash)
        residency = entry.residency
        del residency.hashes[block_hash]
        if not residency.hashes:
            del self.residents[residency]
            if residency.record is not None:
                residency.record.tier = None
            self.version += 1
        return entry
