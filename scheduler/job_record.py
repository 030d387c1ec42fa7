"""One agent job's record: every fact the engine keeps about a job, in one place.

A ``JobRecord`` lives in the scheduler's ``JobTable`` (``scheduler.job_table``), keyed by the job's
engine id (tenant-scoped: ``scheduler.job_hints.tenant_job_id``). Each holder of per-job state keeps
its part here, as a field, instead of a map of its own:

- the table itself: the job's tenant, how its id was given (inferred, confirmed), when a turn of it last
  arrived or finished (``last_active``) and whether it is over (``ended``);
- the policy's ``LeaseTable``: the job's pin lease (``lease``);
- the second KV tier: the job's entries there (``tier``) and whether they went back up ahead of its
  next turn (``prefetched``);
- the prefetcher: when the job's pending turn is expected back, as last asked (``return_due``), and
  whether it was prefetched for that turn (``prefetch_done``);
- the estimator: its pending turn, measured tool durations, first arrival and turn count (``estimate``),
  and what it decided in the event at hand, for the listeners told after it: the pin TTL of the turn
  that just ended (``ttl``) and, when the event ended the job, its turns and completion time
  (``completion``).

A holder may keep an index of records (the lease table's live leases in pin order, the tier's
residents in order of first entry), never a second map of job ids: a test scans the code for one.

Invariants:
- ``tier`` is None or holds at least one hash; ``lease`` is None or a live lease of this job.
- ``ended`` goes back to False when a turn of the job arrives (or a non-final one finishes) again.
- ``ttl`` and ``completion`` are the event's: the table clears them before it publishes each event, so
  a listener never reads an earlier event's decision.
- A record that holds something (``holds_nothing()`` is False) is never forgotten by the table.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scheduler.policy.lease import Lease

__all__ = ["JobCompletion", "JobEstimate", "JobRecord", "PendingTurn", "ReturnForecast", "TierResidency"]


@dataclass
class PendingTurn:
    """A finished non-final turn whose job has not come back yet (what the estimator measures)."""

    tool_name: str | None
    finish_time: float
    turn_index: int = 0
    context_tokens: int = 0
    command: str | None = None


class ReturnForecast(Protocol):
    """The estimator that keeps a job's estimate, as the record's readers ask it: when a pending turn's
    job is expected back (clock time), as of ``now``."""

    def expected_return(self, turn: PendingTurn, now: float) -> float: ...


@dataclass
class JobEstimate:
    """What the estimator knows of one job while it runs; ``forecast`` is that estimator."""

    pending: PendingTurn | None = None
    durations: list[float] = field(default_factory=list)  # this job's measured durations, oldest first
    first_arrival: float | None = None  # clock time of the job's first turn (program-level FCFS key)
    turns: int = 0  # turns of this job that arrived so far
    forecast: ReturnForecast | None = None

    def expected_return(self, now: float) -> float | None:
        """When the pending turn's job is expected back (clock time); None without a pending turn."""
        if self.pending is None or self.forecast is None:
            return None
        return self.forecast.expected_return(self.pending, now)


@dataclass(frozen=True)
class JobCompletion:
    """A job's end as the estimator measured it: its turns and its completion time (first arrival to end)."""

    turns: int
    jct: float


@dataclass(eq=False, slots=True)
class TierResidency:
    """One job's entries in the second KV tier, by block hash, oldest first; ``record`` None: the
    entries of requests without a job (the tier's own)."""

    record: JobRecord | None
    hashes: OrderedDict[int, None] = field(default_factory=OrderedDict)


@dataclass(eq=False, slots=True)
class JobRecord:
    """One job (see the module docstring for who writes which field). Compared and hashed by identity,
    so holders can index records."""

    job_id: str
    tenant: str | None = None
    inferred: bool = False  # the engine gave the job from the prefix chain (no client id)
    confirmed: bool = False  # an inferred job the prefix chain has vouched for (pinned like a declared one)
    last_active: float | None = None  # when a turn of it last arrived or finished; None: never here
    ended: bool = False  # its final turn finished or the client released it
    lease: Lease | None = None
    tier: TierResidency | None = None
    prefetched: bool = False
    return_due: float | None = None
    prefetch_done: bool = False
    estimate: JobEstimate | None = None
    ttl: float = 0.0  # this event's: the pin TTL the estimator chose for the turn that ended (0: do not pin)
    completion: JobCompletion | None = None  # this event's: the job's end, when the event ended it

    @property
    def first_arrival(self) -> float | None:
        """When the job's first turn arrived, as the estimator counts it (None: it does not)."""
        return None if self.estimate is None else self.estimate.first_arrival

    def is_live(self) -> bool:
        """A live job: it holds a lease, or the estimator counts its turns (its first turn arrived and it
        has not ended for the estimator)."""
        return self.lease is not None or self.first_arrival is not None

    def holds_nothing(self) -> bool:
        """No lease, no tier entries, nothing prefetched, no estimate: the table may forget it."""
        return self.lease is None and self.tier is None and not self.prefetched and self.estimate is None
