"""Scheduling policies: the registry of policy names and the one factory the scheduler uses.

``SchedulerConfig.policy`` is validated against ``POLICY_NAMES``; adding a policy means adding its
class here (built as ``cls(config, kv, pin_ttl_fn)``, see ``scheduler.policy.base``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy.base import NoPinsPolicy, PinStats, PinTTLFn, SchedulingPolicy
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


def make_policy(
    config: SchedulerConfig, kv: KVCacheManager, pin_ttl_fn: PinTTLFn | None = None
) -> SchedulingPolicy:
    """The policy named by ``config.policy``, deciding over ``kv``'s blocks."""
    return POLICIES[config.policy](config, kv, pin_ttl_fn)


__all__ = [
    "PIN_COUNTER_NAMES", "POLICIES", "POLICY_NAMES", "ContinuumPolicy", "EndReason", "FcfsPolicy", "Lease",
    "LeaseCounters", "LeaseState", "LeaseTable", "NoPinsPolicy", "PinStats", "PinTTLFn", "PriorityPolicy",
    "SchedulingPolicy", "make_policy",
]
