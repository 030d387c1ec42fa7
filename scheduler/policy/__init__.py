"""Scheduling policies: the registry of policy names and the one factory the scheduler uses.

The registry validates names (``policy_class``: a ``ValueError`` naming the known ones), so
``SchedulerConfig`` stays a leaf; adding a policy means adding its class here (built as
``cls(config, kv, jobs)``; see ``scheduler.policy.base``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.job_table import JobTable
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy.base import NoPinsPolicy, PinStats, SchedulingPolicy
from scheduler.policy.continuum import ContinuumPolicy
from scheduler.policy.fcfs import FcfsPolicy
from scheduler.policy.lease import PIN_COUNTER_NAMES, EndReason, Lease, LeaseCounters, LeaseState
from scheduler.policy.leases import LeaseTable
from scheduler.policy.priority import PriorityPolicy

if TYPE_CHECKING:
    from scheduler.config import SchedulerConfig

POLICIES: dict[str, type[SchedulingPolicy]] = {
    FcfsPolicy.name: FcfsPolicy,
    PriorityPolicy.name: PriorityPolicy,
    ContinuumPolicy.name: ContinuumPolicy,
}
POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)


def policy_class(name: str) -> type[SchedulingPolicy]:
    """The policy class registered as ``name``; ``ValueError`` for an unknown name."""
    cls = POLICIES.get(name)
    if cls is None:
        raise ValueError(f"policy must be one of {POLICY_NAMES}, got {name!r}")
    return cls


def make_policy(config: SchedulerConfig, kv: KVCacheManager, jobs: JobTable) -> SchedulingPolicy:
    """The policy named by ``config.policy``, deciding over ``kv``'s blocks for the jobs of ``jobs``."""
    return policy_class(config.policy)(config, kv, jobs)


__all__ = [
    "PIN_COUNTER_NAMES", "POLICIES", "POLICY_NAMES", "ContinuumPolicy", "EndReason", "FcfsPolicy", "Lease",
    "LeaseCounters", "LeaseState", "LeaseTable", "NoPinsPolicy", "PinStats", "PriorityPolicy",
    "SchedulingPolicy", "make_policy", "policy_class",
]
