"""CONTINUUM pin leases: a finished non-final turn's blocks held for a TTL until the job returns.

Invariants:
- A lease holds exactly one reference on each of its blocks; while the lease lives none of them can
  be evicted or handed to another request (their ``ref_cnt`` stays >= 1).
- At most one lease per job; a newer pin of the same job replaces the older lease.
- ``num_pinned_blocks`` (the sum of the leases' hard parts) never exceeds ``max_pinned_blocks``.
- A lease holds a prefix of its turn's blocks: only blocks registered in the prefix cache (a hash
  chain from the first block) can serve the next turn, so an unhashed tail is never pinned, and when
  the cap leaves room for only part of the chain, the longest prefix that fits is pinned (a returning
  turn then re-prefills only the tail) instead of nothing.
- Soft tail (``soft=True``): the part of the chain past the cap is still held, but as a *soft*
  tail that does not count toward the cap and yields to a running request of any other job, to an
  admission of an earlier job (program order: smaller ``rank``), and to any admission when nothing
  runs (the scheduler decides who asks). Only a later job's admission has to wait for it.
  ``num_soft_blocks`` is the sum of soft tails. A lease displaced by a job expected back sooner
  turns wholly soft instead of ending.
- Grace (``soft`` and ``soft_grace > 0``): a lease whose TTL runs out before its job is back turns
  wholly soft until ``soft_grace`` seconds after the TTL's end, then ends as expired. An overdue job
  is usually running a slow tool, and its cache is still worth more than a later job's.
- Counters: every lease made (``created``) ends exactly once, as ``hit``, ``expired``,
  ``early_released`` (pressure, or its last soft block given up), ``released`` or ``aborted``.
- Ending a lease returns its blocks through ``release_fn`` (tail first, hashes kept), so a late
  return of the job can still hit the prefix cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields

from scheduler.block_pool import KVCacheBlock


@dataclass
class PinLease:
    job_id: str
    request_id: str
    blocks: list[KVCacheBlock]
    created_at: float
    expires_at: float
    # The job's next turn arrived before expiry: the lease now lasts until that turn is admitted.
    returned: bool = False
    # ``blocks[:num_hard]`` count toward the cap; ``blocks[num_hard:]`` are the soft tail.
    num_hard: int = 0
    # Program order: the job's first arrival. Smaller = earlier = served first.
    rank: float = 0.0
    # The TTL ran out: the lease is wholly soft until ``expires_at`` (the end of the grace).
    in_grace: bool = False
    # Block-seconds of today's soft blocks already booked as pinned (they were hard until demoted).
    soft_credit: float = 0.0

    @property
    def num_soft(self) -> int:
        return len(self.blocks) - self.num_hard


@dataclass
class PinCounters:
    created: int = 0
    hit: int = 0  # ended because the job's next turn was admitted
    expired: int = 0  # its time (TTL, plus the grace with soft pins) ran out before the job came back
    early_released: int = 0  # released under memory pressure (or its last soft block given up)
    released: int = 0  # released by the client (job ended) or replaced by a newer pin
    aborted: int = 0
    late_hit: int = 0  # of ``hit``: the job came back after the TTL, within the soft grace
    rejected_cap: int = 0  # no block of a pin fit under the cap (with soft pins: held wholly soft)
    partial_cap: int = 0  # a pin cut to the prefix that fit under the cap (soft pins: the rest soft)
    soft_yielded: int = 0  # a soft tail given up to a running request or an earlier job's admission
    pinned_block_seconds: float = 0.0
    soft_block_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


# The event counters of ``PinCounters`` (every field but the block-seconds total), in field order.
PIN_COUNTER_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PinCounters) if not f.name.endswith("_seconds"))


@dataclass
class PinTable:
    """The live leases, keyed by job id."""

    max_pinned_blocks: int
    release_fn: Callable[[Sequence[KVCacheBlock]], None]
    leases: dict[str, PinLease] = field(default_factory=dict)
    counters: PinCounters = field(default_factory=PinCounters)
    num_pinned_blocks: int = 0
    soft: bool = False
    soft_grace: float = 0.0
    num_soft_blocks: int = 0
    # Bumped on every change, so a waiting queue ordered by "has a live pin" knows to re-sort.
    version: int = 0

    def has_pin(self, job_id: str | None) -> bool:
        return job_id is not None and job_id in self.leases

    def pinned_block_seconds(self, now: float) -> float:
        """Hard-pinned block-seconds: ended leases plus the live ones up to ``now`` (non-decreasing)."""
        live = sum(le.num_hard * (now - le.created_at) for le in self.leases.values())
        return self.counters.pinned_block_seconds + live

    def soft_block_seconds(self, now: float) -> float:
        """Soft-tail block-seconds: ended tails plus the live ones up to ``now`` (non-decreasing)."""
        live = sum(le.num_soft * (now - le.created_at) - le.soft_credit for le in self.leases.values())
        return self.counters.soft_block_seconds + live

    def _soft_tails(self, before_rank: float | None, exclude_job: str | None) -> Iterator[PinLease]:
        """Leases with a soft tail that a request of rank ``before_rank`` (None: any) of another job may take."""
        for le in self.leases.values():
            if le.num_soft and le.job_id != exclude_job and (before_rank is None or le.rank > before_rank):
                yield le

    def soft_blocks_after(self, before_rank: float | None, exclude_job: str | None = None) -> int:
        """Soft blocks an admission of rank ``before_rank`` may take (None: all), its own job's excluded."""
        return sum(le.num_soft for le in self._soft_tails(before_rank, exclude_job))

    def pin(
        self, job_id: str, request_id: str, blocks: list[KVCacheBlock], ttl: float, now: float, rank: float = 0.0
    ) -> int:
        """Make a lease of ``ttl`` seconds over the useful (hashed) prefix of ``blocks``.

        The table takes over the caller's reference on every block of ``blocks``. Hard leases whose
        jobs are expected back later than this one give way first (they end, or turn soft with soft
        pins). The longest prefix that fits the cap is pinned hard; with soft pins the rest of the
        useful prefix is held as the soft tail, without them it is released at once, like the
        unhashed tail always is. Returns the number of blocks pinned hard (0 with soft pins may
        still leave an all-soft lease; ``has_pin`` tells).
        """
        if job_id in self.leases:
            self._end(job_id, now, "released")
        useful = 0
        while useful < len(blocks) and blocks[useful].block_hash is not None:
            useful += 1
        expires = now + ttl
        # The least valuable leases give way: those whose jobs are expected back later than this one.
        while useful and self.num_pinned_blocks + useful > self.max_pinned_blocks:
            latest = self._latest(exclude=None, hard_only=True)
            if latest is None or latest.returned or latest.expires_at <= expires:
                break
            if self.soft:  # it keeps its blocks, but as a soft tail
                self._make_soft(latest, now)
            else:
                self._end(latest.job_id, now, "early_released")
        keep = min(useful, self.max_pinned_blocks - self.num_pinned_blocks)  # >= 0: the cap invariant
        if keep < useful:
            if keep:
                self.counters.partial_cap += 1
            else:
                self.counters.rejected_cap += 1
        held = useful if self.soft else keep
        if held < len(blocks):
            self.release_fn(blocks[held:])
        if not held:
            return 0
        self.leases[job_id] = PinLease(job_id, request_id, blocks[:held], now, expires, num_hard=keep, rank=rank)
        self.num_pinned_blocks += keep
        self.num_soft_blocks += held - keep
        self.counters.created += 1
        self.version += 1
        return keep

    def mark_returned(self, job_id: str | None) -> None:
        """The job's next turn arrived while its lease lived: it is no longer subject to expiry."""
        le = self.leases.get(job_id) if job_id is not None else None
        if le is not None:
            le.returned = True

    def sweep(self, now: float) -> list[str]:
        """Leases whose time ran out (``now >= expires_at``) before their jobs came back: each ends as
        expired, or, with soft pins and a grace, turns wholly soft until ``soft_grace`` after its TTL's
        end (ending at once if a late sweep finds that passed too). Returns the jobs of both kinds."""
        due = [j for j, le in self.leases.items() if now >= le.expires_at and not le.returned]
        for j in due:
            le = self.leases[j]
            grace_end = le.expires_at + self.soft_grace
            if le.in_grace or not self.soft or now >= grace_end:
                self._end(j, now, "expired")
            else:
                self._make_soft(le, now)
                le.in_grace = True
                le.expires_at = grace_end
        return due

    def _make_soft(self, le: PinLease, now: float) -> None:
        """The lease keeps its blocks, all of them as a soft tail (out of the cap).

        Block-seconds: the hard part's time so far is booked as pinned now, and credited against
        the soft tail's booking when it ends (a soft tail is booked from ``created_at``).
        """
        hard_seconds = le.num_hard * max(0.0, now - le.created_at)
        self.counters.pinned_block_seconds += hard_seconds
        le.soft_credit += hard_seconds
        self.num_pinned_blocks -= le.num_hard
        self.num_soft_blocks += le.num_hard
        le.num_hard = 0
        self.version += 1

    def release(self, job_id: str, now: float, reason: str) -> bool:
        """End a job's lease; ``reason`` is one of hit, released, aborted, early_released."""
        le = self.leases.get(job_id)
        if le is None:
            return False
        if reason == "hit" and le.in_grace:
            self.counters.late_hit += 1
        self._end(job_id, now, reason)
        return True

    def release_latest(self, now: float, exclude_job: str | None = None) -> bool:
        """Early release under pressure: the lease whose job is expected back latest goes first."""
        latest = self._latest(exclude=exclude_job)
        if latest is None:
            return False
        self._end(latest.job_id, now, "early_released")
        return True

    def yield_soft(self, now: float, exclude_job: str | None = None, before_rank: float | None = None) -> bool:
        """Give up one soft tail: the latest job in program order (largest rank) first.

        ``before_rank``: only tails of jobs ranked after it (an admission of that rank asks).
        """
        best = max(self._soft_tails(before_rank, exclude_job), key=lambda le: le.rank, default=None)
        if best is None:
            return False
        tail = self._cut_soft(best, now)
        self.counters.soft_yielded += 1
        if not best.blocks:
            del self.leases[best.job_id]
            self.counters.early_released += 1
        self.version += 1
        self.release_fn(tail)
        return True

    def _latest(self, exclude: str | None, hard_only: bool = False) -> PinLease | None:
        """The least valuable lease: one whose job has not returned yet, expected back latest."""
        best = None
        for le in self.leases.values():
            if le.job_id == exclude or (hard_only and not le.num_hard):
                continue
            if best is None or (best.returned, le.expires_at) > (le.returned, best.expires_at):
                best = le
        return best

    def _cut_soft(self, le: PinLease, now: float) -> list[KVCacheBlock]:
        """Detach the lease's soft tail (booking its block-seconds) and return it, still referenced."""
        tail = le.blocks[le.num_hard:]
        del le.blocks[le.num_hard:]
        self.num_soft_blocks -= len(tail)
        self.counters.soft_block_seconds += len(tail) * max(0.0, now - le.created_at) - le.soft_credit
        le.soft_credit = 0.0
        return tail

    def _end(self, job_id: str, now: float, reason: str) -> None:
        """Drop the lease and release its blocks; ``reason`` names the counter to bump."""
        le = self.leases.pop(job_id)
        tail = self._cut_soft(le, now)
        self.num_pinned_blocks -= le.num_hard
        self.counters.pinned_block_seconds += le.num_hard * max(0.0, now - le.created_at)
        setattr(self.counters, reason, getattr(self.counters, reason) + 1)
        self.version += 1
        self.release_fn(le.blocks + tail)
