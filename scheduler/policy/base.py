"""The interface between the scheduler and a scheduling policy.

The scheduler owns the mechanism (token budget, block allocation, queues, preemption); a policy owns
every decision that differs between FCFS, priority and CONTINUUM, and is called at named points of a
step. Contract:
- The scheduler reads time once per call and passes it as ``now``; a policy never reads a clock.
- Blocks a policy holds (CONTINUUM's leases) are referenced blocks of the scheduler's
  ``KVCacheManager``; a policy gives them back only through it.
- A policy's decisions depend only on the request, the pool, the arguments and its own state, and
  ``state_version()`` changes whenever that state does: the waiting queue re-sorts, and a memo of a
  blocked admission (``scheduler.admission_memo``) is dropped, only then.
- A pressure hook (``on_allocation_failed``, ``on_admission_blocked``) returns True only when it gave
  blocks back to the pool: the caller retries. False: nothing changed, and the caller goes on
  (preemption, or the admission stays blocked for this step).
- A policy answers for itself: ``uses_pins`` (class-level) says whether it holds finished turns'
  blocks for their jobs (and so wants the estimator's pin TTLs, a reload-cost profile and job
  inference), ``holds_job`` whether it holds something for a job now. Nothing outside
  ``scheduler.policy`` compares a policy's name.
- A policy is a ``JobListener`` of the scheduler's job table (``scheduler.job_table``), told after
  the estimator: a job's turn arriving, admitted, ending or aborted and the job's release reach it
  from the table, once each, and from nowhere else (CONTINUUM: the lease stops expiring, ends as a
  hit, the ended turn is pinned for the TTL the estimator wrote on the record, the lease ends);
  what it holds for a job it keeps on the job's record. A finished request's blocks that the policy
  does not take over in ``on_turn_end`` are freed by the scheduler right after.
- The step hooks (``on_time``, ``on_allocation_failed``, ``on_admission_blocked``) are the policy's own
  decisions about what it holds, under time and pressure, not events of a job's life.
- Every policy class is built as ``cls(config, kv, jobs)`` (see ``scheduler.policy.make_policy``).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from scheduler.block_pool import KVCacheBlock
from scheduler.job_table import JobListener, JobTable
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy.lease import LeaseCounters
from scheduler.request import Request

if TYPE_CHECKING:
    from scheduler.config import SchedulerConfig


@dataclass(frozen=True)
class PinStats:
    """What a policy holds in the KV pool beyond running requests (all zero without pins).

    ``blocks_pinned`` / ``blocks_soft`` count distinct pool blocks; ``pin_block_refs`` is the cap's
    account, where a prefix block pinned by two jobs counts twice."""

    blocks_pinned: int = 0
    blocks_soft: int = 0
    pinned_jobs: list[str] = field(default_factory=list)  # sorted
    counters: dict[str, float] = field(default_factory=lambda: LeaseCounters().as_dict())
    pinned_block_seconds: float = 0.0  # live: ended leases plus the live ones up to ``now``
    soft_block_seconds: float = 0.0  # live, likewise
    pin_block_refs: int = 0


class SchedulingPolicy(JobListener, abc.ABC):
    """Decisions of one scheduler; see the module docstring for the contract. The job events
    (``on_job_arrival``, ``on_turn_end``, ``on_job_release``, ...) are no-ops unless a policy
    overrides them."""

    name: ClassVar[str]
    uses_pins: ClassVar[bool] = False

    def __init__(self, config: SchedulerConfig, kv: KVCacheManager, jobs: JobTable) -> None:
        self.kv = kv
        self.jobs = jobs

    def holds_job(self, job_id: str) -> bool:
        """Whether this policy holds something (a lease) for ``job_id`` now."""
        return False

    # ---- order ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def waiting_key(self, req: Request) -> tuple:
        """Sort key of a waiting request: smaller is admitted first (ties: insertion order)."""

    @abc.abstractmethod
    def state_version(self) -> int:
        """Changes whenever the policy's state changes (its waiting keys or pressure decisions may then)."""

    @abc.abstractmethod
    def pick_victim(self, running: Sequence[Request]) -> Request:
        """The running request to preempt when no block can be freed otherwise."""

    # ---- memory pressure and time --------------------------------------------------------------
    @abc.abstractmethod
    def on_allocation_failed(self, req: Request, now: float) -> bool:
        """A running request's next chunk does not fit: free something held? True: retry first."""

    @abc.abstractmethod
    def on_admission_blocked(
        self, req: Request, num_new: int, hits: Sequence[KVCacheBlock], anything_running: bool, now: float
    ) -> bool:
        """The waiting head's first chunk (``num_new`` tokens after ``hits``) does not fit: free
        something so it can go? True: retry the admission."""

    @abc.abstractmethod
    def on_time(self, now: float) -> None:
        """Start of a step: let time-bound holdings (leases) run out."""

    # ---- observability -------------------------------------------------------------------------
    @abc.abstractmethod
    def stats(self, now: float) -> PinStats:
        """Held blocks, jobs and counters now."""

    def holds_leases(self) -> bool:
        """Whether any job's blocks are held now (cheap: the idle loop asks it every tick)."""
        return False


class NoPinsPolicy(SchedulingPolicy):
    """A policy that holds no blocks: it hears no job event (a finished request's blocks are freed by
    the scheduler), every pressure hook is a no-op.

    Subclasses define the order (``waiting_key``, ``pick_victim``) only.
    """

    def state_version(self) -> int:
        return 0

    def on_allocation_failed(self, req: Request, now: float) -> bool:
        return False

    def on_admission_blocked(
        self, req: Request, num_new: int, hits: Sequence[KVCacheBlock], anything_running: bool, now: float
    ) -> bool:
        return False

    def on_time(self, now: float) -> None:
        return None

    def stats(self, now: float) -> PinStats:
        return PinStats()
