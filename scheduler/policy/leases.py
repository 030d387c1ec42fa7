"""CONTINUUM pin leases: a finished non-final turn's blocks, held for a TTL until its job returns.

A lease is a state machine; every transition is one method of ``LeaseTable``::

    pin() -> HARD --_demote (displaced by a job expected back sooner)--> SOFT
             HARD | SOFT --_expire (TTL over, job not back)--> GRACE, or ENDED(expired)
             GRACE --_expire (grace over)--> ENDED(expired)
             any live state --_end--> ENDED(hit | expired | early_release | released | aborted)

- HARD: ``blocks[:num_hard]`` (``num_hard > 0``) count toward the cap; ``blocks[num_hard:]`` is the
  soft tail (possibly empty).
- SOFT: wholly soft (``num_hard == 0``): displaced, or no block of it fit under the cap.
- GRACE: the TTL ran out before the job came back; wholly soft until ``grace_ends_at``.
- ENDED: out of the table; its blocks went back through ``release_fn``.

Invariants:
- A lease holds exactly one reference on each of its blocks; while it lives none of them can be
  evicted or handed to another request (their ``ref_cnt`` stays >= 1).
- At most one lease per job, kept on the job's record (``JobRecord.lease`` in the scheduler's job
  table): a live lease is its record's ``lease`` and is in ``_live`` (pin order), an ended one in
  neither; ``leases`` reads them by job id. A newer pin of the same job ends the older lease as released.
- ``num_pinned_blocks`` (the sum of the hard parts) never exceeds ``max_pinned_blocks``, and one
  tenant's hard parts (``pinned_by_tenant``) never exceed ``max_pinned_blocks_per_tenant``, so one
  tenant's pins cannot take the whole budget from another's;
  ``num_soft_blocks`` is the sum of the soft tails. Without ``soft`` only a cheap lease has soft blocks.
- A lease holds a prefix of its turn's blocks: only blocks registered in the prefix cache (a hash
  chain from the first block) can serve the next turn, so an unhashed tail is never pinned, and when
  the cap leaves room for only part of the chain, the longest prefix that fits is pinned hard (with
  ``soft``, the rest of the chain is held as the soft tail).
- A soft tail does not count toward the cap and yields to a running request of any other job, to an
  admission of a job earlier in program order (smaller ``job_arrival_time``), and to any admission
  when nothing runs (the policy decides who asks). Only a later job's admission has to wait for it.
- A lease whose job's next turn arrived (``job_returned``) is never expired: it lives until that turn
  is admitted (hit), or the job is released or aborted, or pressure ends it.
- Counters come from the transitions: ``created`` counts leases made, and ``_end``, the only way
  out, bumps exactly one of hit, expired, early_released, released, aborted (``late_hit`` too for a
  hit in GRACE). So ``created == hit + expired + early_released + released + aborted + live leases``.
- Ending a lease returns its blocks through ``release_fn`` (tail first, hashes kept), so a late
  return of the job can still hit the prefix cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from scheduler.block_pool import KVCacheBlock
from scheduler.job_table import JobTable
from scheduler.policy.lease import EndReason, Lease, LeaseCounters, LeaseState

_ANY = object()  # ``tenant=`` default of the lease queries: every tenant's leases

# The transitions the state machine allows (the module docstring draws them).
_NEXT_STATES: dict[LeaseState, frozenset[LeaseState]] = {
    LeaseState.HARD: frozenset({LeaseState.SOFT, LeaseState.GRACE, LeaseState.ENDED}),
    LeaseState.SOFT: frozenset({LeaseState.GRACE, LeaseState.ENDED}),
    LeaseState.GRACE: frozenset({LeaseState.ENDED}),
    LeaseState.ENDED: frozenset(),
}


class LiveLeases(Mapping[str, Lease]):
    """The live leases by job id, in pin order: a read-only view of the job records' leases."""

    def __init__(self, live: dict[Lease, None], jobs: JobTable) -> None:
        self._live, self._jobs = live, jobs

    def __getitem__(self, job_id: str) -> Lease:
        record = self._jobs.get(job_id)
        if record is None or record.lease is None:
            raise KeyError(job_id)
        return record.lease

    def __iter__(self) -> Iterator[str]:
        return (le.job_id for le in self._live)

    def __len__(self) -> int:
        return len(self._live)


class LeaseTable:
    """The live leases (on their jobs' records). ``version`` changes on every transition and block change."""

    def __init__(
        self,
        max_pinned_blocks: int,
        release_fn: Callable[[Sequence[KVCacheBlock]], None],
        soft: bool = False,
        soft_grace: float = 0.0,
        max_pinned_blocks_per_tenant: int | None = None,
        jobs: JobTable | None = None,
    ) -> None:
        self.max_pinned_blocks = max_pinned_blocks
        self.max_pinned_blocks_per_tenant = (max_pinned_blocks if max_pinned_blocks_per_tenant is None
                                             else min(max_pinned_blocks, max_pinned_blocks_per_tenant))
        self.pinned_by_tenant: dict[str | None, int] = {}
        self.release_fn = release_fn
        self.soft = soft
        self.soft_grace = soft_grace
        self.jobs = jobs if jobs is not None else JobTable()
        self._live: dict[Lease, None] = {}  # the live leases, oldest pin first (leases hash by identity)
        self.leases = LiveLeases(self._live, self.jobs)
        self.counters = LeaseCounters()
        self.num_pinned_blocks = 0
        self.num_soft_blocks = 0
        self.version = 0

    # ---- queries -----------------------------------------------------------------------------
    def has_lease(self, job_id: str | None) -> bool:
        return self._lease_of(job_id) is not None

    def _lease_of(self, job_id: str | None) -> Lease | None:
        record = self.jobs.get(job_id)
        return None if record is None else record.lease

    def pinned_block_seconds(self, now: float) -> float:
        """Hard-pinned block-seconds: ended leases plus the live ones up to ``now`` (non-decreasing)."""
        live = sum(le.num_hard * (now - le.created_at) for le in self._live)
        return self.counters.pinned_block_seconds + live

    def soft_block_seconds(self, now: float) -> float:
        """Soft-tail block-seconds: ended tails plus the live ones up to ``now`` (non-decreasing)."""
        live = sum(
            le.num_soft * (now - le.created_at) - le.demoted_hard_seconds for le in self._live
        )
        return self.counters.soft_block_seconds + live

    def soft_blocks_yieldable(self, after_job_arrival: float | None, exclude_job: str | None = None) -> int:
        """Soft blocks of jobs later than ``after_job_arrival`` (None: all), ``exclude_job``'s excluded."""
        return sum(le.num_soft for le in self._soft_tails(after_job_arrival, exclude_job))

    def _soft_tails(self, after_job_arrival: float | None, exclude_job: str | None) -> Iterator[Lease]:
        for le in self._live:
            if le.num_soft and le.job_id != exclude_job and le.later_than(after_job_arrival):
                yield le

    # ---- transitions -------------------------------------------------------------------------
    def pin(
        self, job_id: str, request_id: str, blocks: list[KVCacheBlock], ttl: float, now: float,
        job_arrival_time: float = 0.0, hard: bool = True, tenant: str | None = None,
    ) -> int:
        """(none) -> HARD, or SOFT when nothing fits under the cap: a lease of ``ttl`` seconds over the
        useful (hashed) prefix of ``blocks``.

        Takes over the caller's reference on every block of ``blocks``. Hard leases of jobs expected
        back later than this one give way first. The longest prefix that fits the cap is pinned hard;
        with soft pins the rest of the useful prefix is the soft tail, without them it is released at
        once, like the unhashed tail always is. With ``hard=False`` (a cheap lease) the whole useful
        prefix is held soft and nothing gives way for it. Returns the number of blocks pinned hard (0
        may still leave a wholly soft lease; ``has_lease`` tells).
        """
        record = self.jobs.record(job_id)
        if record.lease is not None:
            self._end(record.lease, now, EndReason.RELEASED)
        useful = 0
        while useful < len(blocks) and blocks[useful].block_hash is not None:
            useful += 1
        expires = now + ttl
        keep = self._hard_part(useful, tenant, expires, now) if hard else 0
        held = useful if (self.soft or not hard) else keep
        if held < len(blocks):
            self.release_fn(blocks[held:])
        if not held:
            return 0
        state = LeaseState.HARD if keep else LeaseState.SOFT
        lease = record.lease = Lease(
            job_id, request_id, blocks[:held], now, expires, keep, job_arrival_time, state, cheap=not hard,
            tenant=tenant,
        )
        self._live[lease] = None
        self._add_hard(tenant, keep)
        self.num_soft_blocks += held - keep
        self.counters.created += 1
        self.version += 1
        return keep

    def _hard_part(self, useful: int, tenant: str | None, expires_at: float, now: float) -> int:
        """How many of ``useful`` blocks a new hard lease keeps under both caps (later leases give way
        first); counts a partial or rejected pin."""
        want = min(useful, self.max_pinned_blocks_per_tenant)
        self._make_room(want, expires_at, now)
        keep = min(want, self.max_pinned_blocks - self.num_pinned_blocks, self._tenant_room(tenant))
        if keep < useful:
            if keep:
                self.counters.partial_cap += 1
            else:
                self.counters.rejected_cap += 1
        return keep

    def _tenant_room(self, tenant: str | None) -> int:
        return self.max_pinned_blocks_per_tenant - self.pinned_by_tenant.get(tenant, 0)

    def _add_hard(self, tenant: str | None, n: int) -> None:
        """The one place hard-block counts change: the pool's and the tenant's, together."""
        self.num_pinned_blocks += n
        left = self.pinned_by_tenant.get(tenant, 0) + n
        if left:
            self.pinned_by_tenant[tenant] = left
        else:
            self.pinned_by_tenant.pop(tenant, None)

    def distinct_blocks(self) -> tuple[int, int]:
        """``(hard, soft)``: the distinct pool blocks the leases hold (a prefix block that two jobs'
        leases share counts once; ``num_pinned_blocks``, the cap's account, counts it per lease)."""
        hard = {b.block_id for le in self._live for b in le.blocks[:le.num_hard]}
        soft = {b.block_id for le in self._live for b in le.blocks[le.num_hard:]} - hard
        return len(hard), len(soft)

    def mark_job_returned(self, job_id: str | None) -> None:
        """The job's next turn arrived while its lease lived: the lease is no longer subject to expiry."""
        le = self._lease_of(job_id)
        if le is not None:
            le.job_returned = True

    def sweep(self, now: float) -> list[str]:
        """Expire every lease past ``ends_at`` whose job has not come back; returns their jobs.

        HARD or SOFT -> GRACE (with soft pins and a grace still running, counted from the TTL's end),
        else -> ENDED(expired); GRACE -> ENDED(expired).
        """
        due = [le for le in self._live if now >= le.ends_at and not le.job_returned]
        for le in due:
            grace_ends_at = le.expires_at + self.soft_grace
            if le.state is LeaseState.GRACE or not self.soft or now >= grace_ends_at:
                self._end(le, now, EndReason.EXPIRED)
            else:
                self._demote(le, now, LeaseState.GRACE)
                le.grace_ends_at = grace_ends_at
        return [le.job_id for le in due]

    def end(self, job_id: str | None, now: float, reason: EndReason) -> bool:
        """Live -> ENDED(``reason``) for the job's lease; False if it has none."""
        le = self._lease_of(job_id)
        if le is None:
            return False
        self._end(le, now, reason)
        return True

    def early_release_latest(self, now: float, exclude_job: str | None = None, *, tenant: object = _ANY) -> bool:
        """Pressure: -> ENDED(early_release) for the lease whose job is expected back latest (of
        ``tenant``'s leases only, when one is given)."""
        latest = self._latest(exclude_job, tenant=tenant)
        if latest is None:
            return False
        self._end(latest, now, EndReason.EARLY_RELEASE)
        return True

    def yield_soft_tail(
        self, now: float, exclude_job: str | None = None, after_job_arrival: float | None = None
    ) -> bool:
        """Give up one soft tail, the latest job's in program order first (only of jobs later than
        ``after_job_arrival``; None: any). A lease left without blocks -> ENDED(early_release)."""
        tails = self._soft_tails(after_job_arrival, exclude_job)
        best = max(tails, key=lambda le: le.job_arrival_time, default=None)
        if best is None:
            return False
        tail = self._cut_soft(best, now)
        self.counters.soft_yielded += 1
        self.version += 1
        if not best.blocks:
            self._end(best, now, EndReason.EARLY_RELEASE)
        self.release_fn(tail)
        return True

    # ---- internals ---------------------------------------------------------------------------
    def _make_room(self, need: int, expires_at: float, now: float) -> None:
        """Until ``need`` more hard blocks fit the cap, HARD leases of jobs expected back after
        ``expires_at`` give way: -> SOFT with soft pins, else -> ENDED(early_release)."""
        while need and self.num_pinned_blocks + need > self.max_pinned_blocks:
            latest = self._latest(exclude_job=None, hard_only=True)
            if latest is None or latest.job_returned or latest.expires_at <= expires_at:
                return
            if self.soft:
                self._demote(latest, now, LeaseState.SOFT)
            else:
                self._end(latest, now, EndReason.EARLY_RELEASE)

    def _latest(self, exclude_job: str | None, hard_only: bool = False, tenant: object = _ANY) -> Lease | None:
        """The least valuable lease: one whose job has not returned yet, expected back latest."""
        best = None
        for le in self._live:
            if le.job_id == exclude_job or (hard_only and not le.num_hard):
                continue
            if tenant is not _ANY and le.tenant != tenant:
                continue
            if best is None or (best.job_returned, le.ends_at) > (le.job_returned, best.ends_at):
                best = le
        return best

    def _set_state(self, le: Lease, state: LeaseState) -> None:
        assert state in _NEXT_STATES[le.state], f"lease of {le.job_id}: {le.state.name} -> {state.name}"
        le.state = state
        self.version += 1

    def _demote(self, le: Lease, now: float, state: LeaseState) -> None:
        """-> SOFT or GRACE: the lease keeps its blocks, all of them as the soft tail (out of the cap).

        Block-seconds: the hard part's time so far is booked as pinned now and credited against the
        soft tail's booking when it ends (a soft tail is booked from ``created_at``).
        """
        hard_seconds = le.num_hard * max(0.0, now - le.created_at)
        self.counters.pinned_block_seconds += hard_seconds
        le.demoted_hard_seconds += hard_seconds
        self._add_hard(le.tenant, -le.num_hard)
        self.num_soft_blocks += le.num_hard
        le.num_hard = 0
        self._set_state(le, state)

    def _cut_soft(self, le: Lease, now: float) -> list[KVCacheBlock]:
        """Detach the lease's soft tail (booking its block-seconds) and return it, still referenced."""
        tail = le.blocks[le.num_hard:]
        del le.blocks[le.num_hard:]
        self.num_soft_blocks -= len(tail)
        seconds = len(tail) * max(0.0, now - le.created_at) - le.demoted_hard_seconds
        self.counters.soft_block_seconds += seconds
        le.demoted_hard_seconds = 0.0
        return tail

    def _end(self, le: Lease, now: float, reason: EndReason) -> None:
        """Live -> ENDED: drop the lease, book its block-seconds, count ``reason`` (and a late hit),
        and release its blocks, tail first."""
        del self._live[le]
        record = self.jobs.get(le.job_id)
        assert record is not None and record.lease is le, f"lease of {le.job_id} is not its record's"
        record.lease = None
        tail = self._cut_soft(le, now)
        self._add_hard(le.tenant, -le.num_hard)
        c = self.counters
        c.pinned_block_seconds += le.num_hard * max(0.0, now - le.created_at)
        setattr(c, reason.value, getattr(c, reason.value) + 1)
        if reason is EndReason.HIT and le.state is LeaseState.GRACE:
            c.late_hit += 1
        self._set_state(le, LeaseState.ENDED)
        self.release_fn(le.blocks + tail)
