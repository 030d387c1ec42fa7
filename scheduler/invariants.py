"""Whole-state consistency checks of a ``Scheduler`` (used by blast tests and the simulator's debug mode).

O(blocks + requests): call it in tests, not on the serving hot path.
"""

from __future__ import annotations

from collections import Counter

from scheduler.request import RequestStatus
from scheduler.scheduler import Scheduler


def check_invariants(s: Scheduler) -> None:
    """Raise AssertionError on the first violated invariant."""
    pool = s.kv.pool
    queued = set(pool.free_queue.block_ids())
    assert pool.null_block.block_id not in queued, "null block in the free queue"
    assert len(queued) == pool.free_queue.num_free_blocks, "free queue count drifted"
    holders: Counter[int] = Counter()
    for rid, blocks in s.kv.req_blocks.items():
        assert rid in s.requests and s.requests[rid].status is RequestStatus.RUNNING, f"{rid} holds blocks"
        assert [b.block_id for b in blocks] == s.kv.req_block_ids[rid], f"{rid} block ids drifted"
        assert len(set(id(b) for b in blocks)) == len(blocks), f"{rid} holds a block twice"
        holders.update(b.block_id for b in blocks)
    pinned = soft = 0
    for job, lease in s.pins.leases.items():
        assert lease.job_id == job
        assert lease.blocks and 0 <= lease.num_hard <= len(lease.blocks), f"{job}: empty lease or bad hard part"
        assert s.pins.soft or not lease.num_soft, f"{job}: a soft tail while soft pins are off"
        holders.update(b.block_id for b in lease.blocks)
        pinned += lease.num_hard
        soft += lease.num_soft
    assert pinned == s.pins.num_pinned_blocks, "pinned block count drifted"
    assert soft == s.pins.num_soft_blocks, "soft block count drifted"
    assert pinned <= s.pins.max_pinned_blocks, "pinned blocks over the cap"
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
