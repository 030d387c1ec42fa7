"""The pin lease state machine on its own: each transition, the end reasons, and the counters."""

from __future__ import annotations

import pytest

from scheduler import EndReason, KVCacheBlock, LeaseState, LeaseTable
from scheduler.policy import PIN_COUNTER_NAMES

pytestmark = pytest.mark.core


def _hashed(first: int, n: int = 3) -> list[KVCacheBlock]:
    blocks = [KVCacheBlock(first + i) for i in range(n)]
    for b in blocks:
        b.block_hash, b.ref_cnt = b.block_id, 1
    return blocks


def _table(cap: int = 4, soft: bool = True, grace: float = 2.0) -> tuple[LeaseTable, list[KVCacheBlock]]:
    released: list[KVCacheBlock] = []
    return LeaseTable(max_pinned_blocks=cap, release_fn=released.extend, soft=soft, soft_grace=grace), released


def _ended(t: LeaseTable) -> int:
    c = t.counters
    return c.hit + c.expired + c.early_released + c.released + c.aborted


def test_counter_names_keep_their_order() -> None:
    assert PIN_COUNTER_NAMES == ("created", "hit", "expired", "early_released", "released", "aborted",
                                 "late_hit", "rejected_cap", "partial_cap", "soft_yielded")
    assert {r.value for r in EndReason} <= set(PIN_COUNTER_NAMES)


def test_hard_to_grace_to_late_hit() -> None:
    t, released = _table()
    assert t.pin("J", "r", _hashed(1), ttl=5.0, now=0.0, job_arrival_time=0.0) == 3
    le = t.leases["J"]
    assert le.state is LeaseState.HARD and le.grace_ends_at is None and le.ends_at == 5.0
    assert t.sweep(4.9) == [] and le.state is LeaseState.HARD
    assert t.sweep(5.5) == ["J"]
    assert le.state is LeaseState.GRACE and le.num_hard == 0 and le.grace_ends_at == 7.0 and le.ends_at == 7.0
    assert le.expires_at == 5.0 and t.num_pinned_blocks == 0 and t.num_soft_blocks == 3
    assert t.end("J", 6.0, EndReason.HIT) and not t.end("J", 6.0, EndReason.HIT)
    assert le.state is LeaseState.ENDED and len(released) == 3
    assert t.counters.hit == t.counters.late_hit == 1 and _ended(t) == t.counters.created == 1


def test_grace_ends_as_expired_and_a_returned_job_is_never_swept() -> None:
    t, _ = _table()
    t.pin("A", "ra", _hashed(1), ttl=1.0, now=0.0)
    t.pin("B", "rb", _hashed(10, 1), ttl=1.0, now=0.0)
    t.mark_job_returned("B")
    t.sweep(1.0)
    assert t.leases["A"].state is LeaseState.GRACE and t.leases["B"].state is LeaseState.HARD
    t.sweep(3.0)
    assert "A" not in t.leases and t.counters.expired == 1
    t.sweep(100.0)
    assert t.has_lease("B") and t.counters.expired == 1
    assert t.end("B", 100.0, EndReason.HIT) and t.counters.late_hit == 0  # it came back in time


def test_without_soft_pins_expiry_and_displacement_end_the_lease() -> None:
    t, released = _table(cap=3, soft=False)
    t.pin("X", "rx", _hashed(1), ttl=10.0, now=0.0)
    t.pin("Y", "ry", _hashed(10), ttl=1.0, now=0.0)  # expected back sooner: X gives way
    assert not t.has_lease("X") and t.counters.early_released == 1 and len(released) == 3
    t.sweep(1.0)
    assert not t.leases and t.counters.expired == 1 and _ended(t) == t.counters.created == 2


def test_soft_lease_yields_its_tail_and_ends_as_early_release() -> None:
    t, released = _table(cap=0)
    assert t.pin("S", "rs", _hashed(1), ttl=5.0, now=0.0, job_arrival_time=3.0) == 0
    le = t.leases["S"]
    assert le.state is LeaseState.SOFT and t.counters.rejected_cap == 1
    assert t.soft_blocks_yieldable(after_job_arrival=3.0) == 0 and t.soft_blocks_yieldable(2.0) == 3
    assert not t.yield_soft_tail(1.0, after_job_arrival=3.0) and not t.yield_soft_tail(1.0, exclude_job="S")
    assert t.yield_soft_tail(1.0, after_job_arrival=2.0)
    assert le.state is LeaseState.ENDED and t.counters.soft_yielded == 1 and t.counters.early_released == 1
    assert t.counters.soft_block_seconds == 3.0 and len(released) == 3


def test_a_newer_pin_of_the_job_releases_the_older_and_block_seconds_are_live() -> None:
    t, _ = _table(cap=2)
    t.pin("J", "r1", _hashed(1), ttl=5.0, now=0.0)  # 2 hard + 1 soft
    assert t.counters.partial_cap == 1 and t.leases["J"].num_soft == 1
    assert t.pinned_block_seconds(2.0) == 4.0 and t.soft_block_seconds(2.0) == 2.0
    t.pin("J", "r2", _hashed(10, 1), ttl=5.0, now=2.0)
    assert t.counters.released == 1 and t.leases["J"].request_id == "r2"
    assert t.counters.pinned_block_seconds == 4.0 and t.counters.soft_block_seconds == 2.0


def test_pressure_releases_the_lease_expected_back_latest() -> None:
    t, _ = _table(cap=10)
    t.pin("A", "ra", _hashed(1), ttl=5.0, now=0.0)
    t.pin("B", "rb", _hashed(10), ttl=9.0, now=0.0)
    assert t.early_release_latest(1.0, exclude_job=None) and t.has_lease("A") and not t.has_lease("B")
    assert not t.early_release_latest(1.0, exclude_job="A")


def test_illegal_transitions_are_refused() -> None:
    t, _ = _table()
    t.pin("J", "r", _hashed(1), ttl=1.0, now=0.0)
    le = t.leases["J"]
    t.sweep(1.0)
    with pytest.raises(AssertionError):
        t._set_state(le, LeaseState.HARD)  # GRACE never goes back
    t.end("J", 1.5, EndReason.ABORTED)
    with pytest.raises(AssertionError):
        t._set_state(le, LeaseState.ENDED)  # a lease ends once
    assert t.counters.aborted == 1 and _ended(t) == t.counters.created
