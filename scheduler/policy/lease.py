"""One CONTINUUM pin lease: its states, why it ends, the lease record and the pin counters.

The transitions between the states, and the invariants they keep, are in ``scheduler.policy.leases``.
``PIN_COUNTER_NAMES`` (the event counters, in field order) is the one list of pin metric names: the
server's Prometheus metrics and the benchmarks read the counters by these names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields

from scheduler.block_pool import KVCacheBlock


class LeaseState(enum.Enum):
    HARD = "hard"  # ``num_hard > 0`` blocks count toward the cap; the rest, if any, is a soft tail
    SOFT = "soft"  # wholly soft (``num_hard == 0``): displaced, or nothing fit under the cap
    GRACE = "grace"  # the TTL ran out before the job came back: wholly soft until ``grace_ends_at``
    ENDED = "ended"  # out of the table, its blocks released


class EndReason(str, enum.Enum):
    """Why a lease ended; the value is the name of the counter it bumps."""

    HIT = "hit"  # the job's next turn was admitted
    EXPIRED = "expired"  # its TTL (and with soft pins its grace) ran out before the job came back
    EARLY_RELEASE = "early_released"  # memory pressure, or its last soft block was given up
    RELEASED = "released"  # the client ended the job, or a newer pin of the job replaced it
    ABORTED = "aborted"  # a request of the job was aborted


@dataclass(eq=False)
class Lease:
    """One job's lease; compared and hashed by identity (the lease table indexes live leases)."""

    job_id: str
    request_id: str
    blocks: list[KVCacheBlock]
    created_at: float
    expires_at: float  # the TTL's end
    num_hard: int  # ``blocks[:num_hard]`` count toward the cap; the rest is the soft tail
    job_arrival_time: float  # program order: the job's first arrival; smaller = earlier = served first
    state: LeaseState = LeaseState.HARD
    job_returned: bool = False  # the job's next turn arrived: the lease is no longer subject to expiry
    grace_ends_at: float | None = None  # set on entering GRACE
    # Block-seconds of today's soft blocks already booked as pinned (they were hard until demoted).
    demoted_hard_seconds: float = 0.0
    cheap: bool = False  # pinned wholly soft on purpose (an inferred job's turn), even without soft pins
    tenant: str | None = None  # whose pin budget its hard part counts against

    @property
    def num_soft(self) -> int:
        return len(self.blocks) - self.num_hard

    @property
    def ends_at(self) -> float:
        """When the lease ends unless its job comes back: the TTL's end, in GRACE the grace's end."""
        return self.expires_at if self.grace_ends_at is None else self.grace_ends_at

    def later_than(self, job_arrival_time: float | None) -> bool:
        """Its job comes after ``job_arrival_time`` in program order (None: after everything)."""
        return job_arrival_time is None or self.job_arrival_time > job_arrival_time


@dataclass
class LeaseCounters:
    """Pin events. Every lease made (``created``) ends exactly once, as one of ``hit``, ``expired``,
    ``early_released``, ``released`` or ``aborted`` (``EndReason``); the rest are sub-counts or events."""

    created: int = 0
    hit: int = 0
    expired: int = 0
    early_released: int = 0
    released: int = 0
    aborted: int = 0
    late_hit: int = 0  # of ``hit``: the job came back after the TTL, within the soft grace
    rejected_cap: int = 0  # no block of a pin fit under the cap (with soft pins: held wholly soft)
    partial_cap: int = 0  # a pin cut to the prefix that fit under the cap (soft pins: the rest soft)
    soft_yielded: int = 0  # a soft tail given up to a running request or an earlier job's admission
    pinned_block_seconds: float = 0.0  # of ended hard parts (live ones: ``LeaseTable.pinned_block_seconds``)
    soft_block_seconds: float = 0.0  # of ended soft tails (live ones: ``LeaseTable.soft_block_seconds``)

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


# The event counters of ``LeaseCounters`` (every field but the block-seconds totals), in field order.
PIN_COUNTER_NAMES: tuple[str, ...] = tuple(
    f.name for f in fields(LeaseCounters) if not f.name.endswith("_seconds")
)
