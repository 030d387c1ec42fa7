"""BlockPool and free queue: exact ids and exact queue order."""

from __future__ import annotations

import pytest

from scheduler import BlockPool, FreeBlockQueue, KVCacheBlock

pytestmark = pytest.mark.core


def test_free_queue_order_and_middle_removal() -> None:
    blocks = [KVCacheBlock(i) for i in range(5)]
    q = FreeBlockQueue(blocks)
    assert q.block_ids() == [0, 1, 2, 3, 4]
    q.remove(blocks[2])
    assert q.block_ids() == [0, 1, 3, 4]
    assert q.popleft() is blocks[0]
    q.append(blocks[2])
    assert q.block_ids() == [1, 3, 4, 2]
    assert q.num_free_blocks == 4
    with pytest.raises(RuntimeError):
        q.append(blocks[3])  # already queued


def test_null_block_reserved_and_lru_allocation() -> None:
    pool = BlockPool(6)
    assert pool.num_free_blocks == 5
    assert pool.free_queue.block_ids() == [1, 2, 3, 4, 5]
    got = pool.get_new_blocks(3)
    assert [b.block_id for b in got] == [1, 2, 3]
    assert all(b.ref_cnt == 1 for b in got)
    assert pool.num_used_blocks == 3 and pool.num_empty_blocks == 2
    with pytest.raises(ValueError):
        pool.get_new_blocks(3)


def test_free_in_reverse_and_lazy_eviction() -> None:
    pool = BlockPool(6)
    a, b, c = pool.get_new_blocks(3)
    pool.cache_block(a, 111)
    pool.cache_block(b, 222)
    pool.free_blocks(reversed([a, b, c]))  # tail first
    # Remaining empties first (4, 5), then c, b, a: the tail of the request is evicted first.
    assert pool.free_queue.block_ids() == [4, 5, 3, 2, 1]
    assert pool.num_cached_free == 2 and pool.num_empty_blocks == 3
    assert pool.cached_block_map.get(111) is a  # still findable while free
    pool.touch([a])  # a prefix hit revives it from the middle of the queue
    assert a.ref_cnt == 1 and pool.free_queue.block_ids() == [4, 5, 3, 2]
    assert pool.num_cached_free == 1
    got = pool.get_new_blocks(4)  # pops 4, 5, 3, then 2 (evicting hash 222)
    assert [x.block_id for x in got] == [4, 5, 3, 2]
    assert pool.cached_block_map.get(222) is None and b.block_hash is None
    assert pool.num_cached_free == 0


def test_double_free_is_an_error() -> None:
    pool = BlockPool(3)
    (a,) = pool.get_new_blocks(1)
    pool.free_blocks([a])
    with pytest.raises(RuntimeError):
        pool.free_blocks([a])


def test_duplicate_hash_keeps_first() -> None:
    pool = BlockPool(4)
    a, b = pool.get_new_blocks(2)
    pool.cache_block(a, 7)
    pool.cache_block(b, 7)
    assert pool.cached_block_map.get(7) is a and b.block_hash is None
