"""Whole-state consistency checks of a ``Scheduler`` (used by blast tests and the simulator's debug mode).

O(blocks + requests): call it in tests, not on the serving hot path. Checked:
- requests: each tracked request is in exactly one queue; running ones hold blocks whose ids mirror
  them, and no block is registered in the prefix cache before its KV was computed;
- leases (CONTINUUM): the state agrees with the hard part, counts and the cap hold, soft blocks only
  with soft pins or in a cheap lease, each tenant within its own cap, and the counters partition
  the ended leases;
- pool: every block's ``ref_cnt`` equals its holders (running requests plus leases), a block is in
  the free queue exactly when unreferenced, and the cached-free count and hash map agree;
- second tier: no hash in both tiers, slots partitioned between entries and free ones, every entry
  leaves exactly once (the counters add up);
- job records: a live lease is its job record's ``lease`` and every record's lease is live; a tier
  resident is its record's ``tier`` and every record's residency is a resident; the tier's
  ``prefetched`` index is exactly the records marked prefetched.
"""

from __future__ import annotations

from collections import Counter

from scheduler.block_pool import BlockPool
from scheduler.job_table import JobTable
from scheduler.kv_tier import KVTier
from scheduler.policy import ContinuumPolicy, LeaseState, LeaseTable
from scheduler.request import RequestStatus
from scheduler.scheduler import Scheduler


def check_invariants(s: Scheduler) -> None:
    """Raise AssertionError on the first violated invariant."""
    holders: Counter[int] = Counter()
    _check_request_blocks(s, holders)
    if isinstance(s.policy, ContinuumPolicy):
        _check_leases(s.policy.leases, holders)
    _check_pool(s.kv.pool, holders)
    if s.kv.tier is not None:
        _check_tier(s.kv.tier, s.kv.pool)
    _check_job_records(s.jobs, s.policy.leases if isinstance(s.policy, ContinuumPolicy) else None, s.kv.tier)
    _check_queues(s)


def _check_request_blocks(s: Scheduler, holders: Counter[int]) -> None:
    for rid, blocks in s.kv.req_blocks.items():
        assert rid in s.requests and s.requests[rid].status is RequestStatus.RUNNING, f"{rid} holds blocks"
        assert [b.block_id for b in blocks] == s.kv.req_block_ids[rid], f"{rid} block ids drifted"
        assert len(set(id(b) for b in blocks)) == len(blocks), f"{rid} holds a block twice"
        holders.update(b.block_id for b in blocks)


def _check_leases(table: LeaseTable, holders: Counter[int]) -> None:
    pinned = soft = 0
    by_tenant: Counter[str | None] = Counter()
    for job, lease in table.leases.items():
        assert lease.job_id == job
        assert lease.blocks, f"{job}: an empty lease"
        assert 0 <= lease.num_hard <= len(lease.blocks), f"{job}: bad hard part"
        assert table.soft or lease.cheap or not lease.num_soft, f"{job}: a soft tail while soft pins are off"
        assert lease.state is not LeaseState.ENDED, f"{job}: an ended lease in the table"
        assert (lease.state is LeaseState.HARD) == (lease.num_hard > 0), f"{job}: {lease.state.name} lease"
        assert (lease.state is LeaseState.GRACE) == (lease.grace_ends_at is not None), f"{job}: grace end"
        holders.update(b.block_id for b in lease.blocks)
        pinned += lease.num_hard
        soft += lease.num_soft
        by_tenant[lease.tenant] += lease.num_hard
    assert pinned == table.num_pinned_blocks, "pinned block count drifted"
    assert +by_tenant == table.pinned_by_tenant, "per-tenant pinned counts drifted"
    assert all(n <= table.max_pinned_blocks_per_tenant for n in by_tenant.values()), "a tenant over its cap"
    assert soft == table.num_soft_blocks, "soft block count drifted"
    assert pinned <= table.max_pinned_blocks, "pinned blocks over the cap"
    c = table.counters
    ended = c.hit + c.expired + c.early_released + c.released + c.aborted
    assert c.created == ended + len(table.leases), "a lease ended twice or not at all"
    assert c.late_hit <= c.hit, "late hits are hits"


def _check_pool(pool: BlockPool, holders: Counter[int]) -> None:
    queued = set(pool.free_queue.block_ids())
    assert pool.null_block.block_id not in queued, "null block in the free queue"
    assert len(queued) == pool.free_queue.num_free_blocks, "free queue count drifted"
    cached_free = 0
    for b in pool.blocks[1:]:
        assert b.ref_cnt >= 0, f"negative ref count on {b}"
        assert b.ref_cnt == holders[b.block_id], f"{b} ref {b.ref_cnt} but {holders[b.block_id]} holders"
        assert (b.ref_cnt == 0) == (b.block_id in queued), f"{b} free-queue membership wrong"
        if b.ref_cnt == 0 and b.block_hash is not None:
            cached_free += 1
    assert cached_free == pool.num_cached_free, "cached-free count drifted"
    assert pool.num_free_blocks + pool.num_used_blocks == pool.num_blocks - 1
    for h, b in pool.cached_block_map.items():
        assert b.block_hash == h, "hash map points at a block with another hash"


def _check_tier(tier: KVTier, pool: BlockPool) -> None:
    assert not tier.entries.keys() & pool.cached_block_map.keys(), "a hash in both the pool and the tier"
    slots = [e.slot for e in tier.entries.values()]
    assert len(set(slots)) == len(slots), "two tier entries share a slot"
    assert not set(slots) & set(tier.free_slots), "a tier slot both used and free"
    assert len(slots) + len(tier.free_slots) == tier.num_slots, "tier slots drifted"
    assert all(res.hashes for res in tier.residents), "an empty residency among the tier's residents"
    assert sum(len(res.hashes) for res in tier.residents) == len(tier.entries), "tier job index drifted"
    assert all(tier.entries[h].residency is res for res in tier.residents for h in res.hashes), "entry owner drifted"
    c = tier.counters
    assert c.stored == c.reloaded + c.dropped + c.cleared + len(tier.entries), "a tier entry left twice or never"
    assert not tier.protected, "tier entries still protected after the step"


def _check_job_records(jobs: JobTable, leases: LeaseTable | None, tier: KVTier | None) -> None:
    live = {id(le) for le in leases.leases.values()} if leases is not None else set()
    residents = {id(res) for res in tier.residents} if tier is not None else set()
    prefetched = {id(r) for r in tier.prefetched} if tier is not None else set()
    for record in jobs:
        if record.lease is not None:
            assert id(record.lease) in live and record.lease.job_id == record.job_id, f"{record.job_id}: stale lease"
        if record.tier is not None:
            assert id(record.tier) in residents and record.tier.record is record, f"{record.job_id}: stale residency"
        assert record.prefetched == (id(record) in prefetched), f"{record.job_id}: prefetched index drifted"
    if leases is not None:
        for job, lease in leases.leases.items():
            rec = jobs.get(job)
            assert rec is not None and rec.lease is lease, f"{job}: a live lease off its record"
    if tier is not None:
        for res in tier.residents:
            assert res.record is None or res.record.tier is res, "a tier resident off its record"


def _check_queues(s: Scheduler) -> None:
    running = {r.request_id for r in s.running}
    waiting = {r.request_id for r in s.waiting}
    assert len(running) == len(s.running) and len(waiting) == len(s.waiting), "duplicate queue entry"
    assert not running & waiting, "request both running and waiting"
    assert running | waiting == set(s.requests), "request tracked but in no queue"
    bs = s.config.block_size
    for r in s.running:
        assert r.status is RequestStatus.RUNNING
        assert 0 <= r.num_computed_tokens <= r.num_tokens
        cached = s.kv.num_cached.get(r.request_id, 0)
        assert cached * bs <= r.num_computed_tokens, (
            f"{r.request_id}: a block was registered in the prefix cache before its KV was computed"
        )
    for r in s.waiting:
        assert r.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
    assert len(s.running) <= s.config.max_num_seqs
