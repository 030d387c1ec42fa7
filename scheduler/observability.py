"""Read-only views of a scheduler's state: the ``stats()`` snapshot and the trace events.

Built from plain values the scheduler hands over (its queue counts and KV manager, the policy's
``PinStats``, all zero without pins): nothing here holds or changes scheduler state. A snapshot is a
frozen value with a field per figure (``SchedulerStats``, its second tier's ``TierStats``, its pin
counters a copy of the lease table's ``LeaseCounters``): readers name fields, never string keys;
``as_dict`` is its JSON form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy.base import PinStats
from scheduler.policy.lease import LeaseCounters
from scheduler.request import Request
from scheduler.step_io import SchedulerOutput
from scheduler.tier_copy import LOAD, PREFETCH, SAVE


class QueueCounts(NamedTuple):
    """A scheduler's queues now, and its KV manager (read, never changed)."""

    num_running: int
    num_waiting: int
    num_preemptions: int
    kv: KVCacheManager


@dataclass(frozen=True)
class TierStats:
    """The second KV tier now: blocks held and capacity, its event counters (``scheduler.kv_tier.TierCounters``)
    and the prompt tokens its loads served (reloads that were not prefetches)."""

    blocks: int
    capacity_blocks: int
    stored: int
    reloaded: int
    prefetched: int
    dropped: int
    cleared: int
    refused: int
    hit_tokens: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class SchedulerStats:
    num_running: int
    num_waiting: int
    num_blocks: int
    blocks_in_use: int
    blocks_cached_free: int
    blocks_empty: int
    blocks_pinned: int
    blocks_soft: int
    pin_block_refs: int
    prefix_query_tokens: int
    prefix_hit_tokens: int
    num_preemptions: int
    num_pinned_jobs: int
    # Pin event counters and the block-seconds of ended leases (a copy); all zero without pins.
    pins: LeaseCounters = field(default_factory=LeaseCounters)
    # Live block-seconds: ended leases plus the live ones up to the snapshot's time.
    pinned_block_seconds: float = 0.0
    soft_block_seconds: float = 0.0
    tier: TierStats | None = None  # None without a second KV tier

    def as_dict(self) -> dict[str, object]:
        """The snapshot as JSON-able values (the pin counters and the tier as nested objects)."""
        return asdict(self)


def tier_stats(kv: KVCacheManager) -> TierStats | None:
    tier = kv.tier
    if tier is None:
        return None
    c = tier.counters
    return TierStats(blocks=len(tier.entries), capacity_blocks=tier.num_slots, stored=c.stored,
                     reloaded=c.reloaded, prefetched=c.prefetched, dropped=c.dropped, cleared=c.cleared,
                     refused=c.refused, hit_tokens=(c.reloaded - c.prefetched) * kv.block_size)


def stats_snapshot(s: QueueCounts, pins: PinStats) -> SchedulerStats:
    pool = s.kv.pool
    return SchedulerStats(
        num_running=s.num_running,
        num_waiting=s.num_waiting,
        num_blocks=pool.num_blocks - 1,
        blocks_in_use=pool.num_used_blocks,
        blocks_cached_free=pool.num_cached_free,
        blocks_empty=pool.num_empty_blocks,
        blocks_pinned=pins.blocks_pinned,
        blocks_soft=pins.blocks_soft,
        pin_block_refs=pins.pin_block_refs,
        prefix_query_tokens=s.kv.prefix_query_tokens,
        prefix_hit_tokens=s.kv.prefix_hit_tokens,
        num_preemptions=s.num_preemptions,
        num_pinned_jobs=len(pins.pinned_jobs),
        pins=LeaseCounters(**pins.counters),
        pinned_block_seconds=pins.pinned_block_seconds,
        soft_block_seconds=pins.soft_block_seconds,
        tier=tier_stats(s.kv),
    )


def admit_event(step: int, now: float, req: Request, num_hit: int, resumed: bool, loaded: int = 0) -> dict:
    """An admission: ``hit_tokens`` found cached, ``loaded_tokens`` of them loaded back from the second tier."""
    return {"event": "admit", "t": now, "step": step, "request_id": req.request_id,
            "job_id": req.job_id, "prompt_tokens": req.num_tokens, "hit_tokens": num_hit,
            "loaded_tokens": loaded, "resumed": resumed}


def step_event(s: QueueCounts, pins: PinStats, step: int, now: float, out: SchedulerOutput) -> dict:
    pool = s.kv.pool
    return {
        "event": "step", "t": now, "step": step,
        "waiting": s.num_waiting, "running": s.num_running,
        "blocks_empty": pool.num_empty_blocks, "blocks_cached_free": pool.num_cached_free,
        "blocks_in_use": pool.num_used_blocks, "blocks_pinned": pins.blocks_pinned,
        "blocks_soft": pins.blocks_soft, "pinned_jobs": pins.pinned_jobs,
        "scheduled_new": len(out.new_req_ids), "scheduled_resumed": len(out.resumed_req_ids),
        "scheduled_running": len(out.scheduled) - len(out.new_req_ids) - len(out.resumed_req_ids),
        "preempted": sorted(out.preempted_req_ids), "tokens": out.total_num_scheduled_tokens,
        **({"tier_blocks": len(s.kv.tier.entries), "tier_saves": sum(c[0] == SAVE for c in out.kv_copies),
            "tier_loads": sum(c[0] == LOAD for c in out.kv_copies),
            "tier_prefetches": sum(c[0] == PREFETCH for c in out.kv_copies)} if s.kv.tier is not None else {}),
    }
