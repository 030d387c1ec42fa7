"""CONTINUUM in the scheduler, with a fake clock and a fake runner: pins, TTL expiry, job ordering,
victims, the pinned-fraction cap, soft tails past the cap, release under admission pressure, DELETE
and abort."""

from __future__ import annotations

import pytest
from sched_helpers import make_request, pinning, run_step, run_to_completion

from scheduler import FakeClock, FakeRunner, LeaseState, LeaseTable, Scheduler, SchedulerConfig
from scheduler.invariants import check_invariants

pytestmark = pytest.mark.core


def pins(s: Scheduler) -> LeaseTable:
    """The CONTINUUM lease table of ``s``."""
    return s.policy.leases


def _sched(clock: FakeClock, ttl: float = 5.0, **kw) -> Scheduler:
    kw.setdefault("num_blocks", 17)
    kw.setdefault("block_size", 4)
    kw.setdefault("max_model_len", 64)
    kw.setdefault("policy", "continuum")
    return Scheduler(SchedulerConfig(**kw), clock=clock, estimator=pinning(lambda r: ttl))


def _turn(
    rid: str, job: str, prompt: list[int], t: float, job_t: float, max_tokens: int = 4, last: bool = False
):
    return make_request(rid, prompt, max_tokens, t=t, job_id=job, job_arrival_time=job_t, is_last_step=last)


def _pinned_job(ttl: float, **kw) -> tuple[Scheduler, FakeClock, FakeRunner, list[int]]:
    """A scheduler whose job ``job`` finished one turn (10 prompt tokens) and pinned 3 hashed blocks."""
    clock = FakeClock()
    s = _sched(clock, ttl=ttl, **kw)
    runner = FakeRunner()
    s.add_request(_turn("t1", "job", list(range(10)), 0.0, 0.0))
    return s, clock, runner, _finish_turn(s, runner, "t1")


def _finish_turn(s: Scheduler, runner: FakeRunner, rid: str) -> list[int]:
    """Run until request ``rid`` finishes; return its full token list."""
    req = s.requests[rid]
    while rid in s.requests:
        run_step(s, runner)
    return req.all_token_ids


def test_second_turn_reuses_pinned_prefix_despite_pressure() -> None:
    for policy, expect_hit in (("continuum", True), ("fcfs", False)):
        clock = FakeClock()
        s = _sched(clock, policy=policy)
        runner = FakeRunner()
        s.add_request(_turn("t1", "job", list(range(10)), 0.0, 0.0))
        toks = _finish_turn(s, runner, "t1")  # 14 tokens, 13 computed -> 3 full blocks
        if expect_hit:
            # Only the three hashed blocks are pinned; the partial fourth could never be hit.
            assert pins(s).has_lease("job") and s.stats().blocks_pinned == 3
            assert s.stats().blocks_in_use == 3
        # Two other requests churn through every free block while the job is away at its tool.
        for k in range(2):
            s.add_request(make_request(f"other{k}", [100 * (k + 1) + i for i in range(40)], 8, t=0.5))
            run_to_completion(s, runner)
        clock.advance(1.0)
        s.add_request(_turn("t2", "job", toks + [7, 7, 7], 1.0, 0.0))
        out = s.schedule()
        (sr,) = out.scheduled
        assert sr.num_computed_tokens == (12 if expect_hit else 0), policy
        if expect_hit:
            assert s.requests["t2"].pin_hit and not pins(s).has_lease("job")
            assert pins(s).counters.hit == 1
        check_invariants(s)


def test_expired_pin_released_in_first_step_after_expiry_not_before() -> None:
    s, clock, _, _ = _pinned_job(5.0, soft_pins=False)
    lease = pins(s).leases["job"]
    clock.set(lease.expires_at - 0.01)
    s.schedule()
    assert pins(s).has_lease("job")
    clock.set(lease.expires_at)
    s.schedule()
    assert not pins(s).has_lease("job") and pins(s).counters.expired == 1
    # Released blocks keep their hashes: a late return still hits the prefix cache.
    assert s.kv.pool.num_cached_free == 3
    check_invariants(s)


def test_pin_of_a_returned_job_outlives_its_ttl_until_admission() -> None:
    clock = FakeClock()
    s = _sched(clock, ttl=1.0, max_num_seqs=1)
    runner = FakeRunner()
    s.add_request(_turn("t1", "job", list(range(10)), 0.0, 0.0))
    toks = _finish_turn(s, runner, "t1")
    s.add_request(_turn("busy", "other", [90, 91], 0.1, 0.1, max_tokens=20))
    run_step(s, runner)  # "busy" holds the only seat
    clock.advance(0.5)
    s.add_request(_turn("t2", "job", toks + [1], 0.6, 0.0))  # back in time, but must wait for a seat
    clock.advance(5.0)  # far past the TTL while waiting
    s.schedule()
    assert pins(s).has_lease("job") and pins(s).counters.expired == 0
    _finish_turn(s, runner, "busy")
    while "t2" in s.requests and s.requests["t2"].num_cached_tokens < 0:
        run_step(s, runner)
    assert s.requests["t2"].num_cached_tokens == 12 and pins(s).counters.hit == 1
    check_invariants(s)


def test_returning_job_jumps_ahead_of_newer_job_and_program_fcfs() -> None:
    clock = FakeClock()
    s = _sched(clock, num_blocks=33, max_num_seqs=1)
    runner = FakeRunner()
    s.add_request(_turn("a1", "A", list(range(6)), 0.0, 0.0))
    a_toks = _finish_turn(s, runner, "a1")  # A pinned
    s.add_request(_turn("c1", "C", [50, 51, 52], 0.1, 0.1, max_tokens=30))  # occupies the only seat
    run_step(s, runner)
    s.add_request(_turn("b1", "B", [60, 61, 62], 1.0, 1.0))  # newer job, no pin
    s.add_request(_turn("d2", "D", [70, 71], 1.5, 0.05))  # a later turn of an older job (no pin)
    s.add_request(_turn("a2", "A", a_toks + [9], 2.0, 0.0))  # A returns last but holds a pin
    s.waiting.order()
    assert [r.request_id for r in s.waiting] == ["a2", "d2", "b1"]
    _finish_turn(s, runner, "c1")
    admitted = []
    while s.waiting:
        out, _ = run_step(s, runner)
        admitted += out.new_req_ids
    assert admitted == ["a2", "d2", "b1"]


def test_victims_are_unpinned_jobs_latest_job_arrival_first() -> None:
    clock = FakeClock()
    s = _sched(clock, num_blocks=7, max_model_len=24, max_pinned_fraction=0.0)
    runner = FakeRunner()
    # Three running turns of jobs that arrived at 0, 5 and 2; the pool runs dry at the 3rd block.
    for rid, job, jt in (("x", "X", 0.0), ("y", "Y", 5.0), ("z", "Z", 2.0)):
        s.add_request(_turn(rid, job, [ord(rid)] * 8, jt, jt, max_tokens=6))
    run_step(s, runner)
    out, _ = run_step(s, runner)
    assert out.preempted_req_ids == {"y"}  # latest job arrival, even though not last admitted
    # A job holding a pin is spared while an unpinned job can give way.
    s2 = _sched(clock, num_blocks=12, max_model_len=24, max_pinned_fraction=0.5)
    s2.add_request(_turn("p1", "P", [1, 2, 3, 4, 5], 0.0, 9.0, max_tokens=1))
    _finish_turn(s2, runner, "p1")
    assert pins(s2).has_lease("P")
    s2.add_request(_turn("p2", "P", [1, 2, 3, 4, 5, 6, 7, 8], 9.5, 9.0, max_tokens=1))
    victim = None
    s2.running.append(s2.requests["p2"])  # pretend both run: the victim rule alone decides
    s2.add_request(_turn("q", "Q", [9] * 8, 1.0, 1.0))
    s2.running.append(s2.requests["q"])
    victim = s2.policy.pick_victim(s2.running)
    assert victim.request_id == "q"  # P (job arrival 9.0) holds a pin; Q (1.0) does not


def test_pinned_fraction_never_exceeds_cap() -> None:
    for soft in (False, True):
        clock = FakeClock()
        s = _sched(clock, num_blocks=21, max_pinned_fraction=0.3, soft_pins=soft)  # cap = 6 of 20 blocks
        runner = FakeRunner()
        for j in range(6):
            # 9 prompt + 4 output tokens: 12 computed, three full (hashed) blocks per turn.
            s.add_request(_turn(f"r{j}", f"J{j}", [j * 10 + k for k in range(9)], float(j), float(j)))
            _finish_turn(s, runner, f"r{j}")
            assert pins(s).num_pinned_blocks <= 6
            check_invariants(s)
        # Each lease holds 3 blocks: two fit under the cap of 6; later pins (expected back later) are
        # refused as pins. With soft pins their prefixes are still held, as soft tails outside the cap.
        assert pins(s).counters.rejected_cap == 4 and pins(s).num_pinned_blocks == 6
        if soft:
            assert sorted(pins(s).leases) == [f"J{j}" for j in range(6)] and pins(s).num_soft_blocks == 12
            assert [pins(s).leases[f"J{j}"].num_hard for j in range(6)] == [3, 3, 0, 0, 0, 0]
        else:
            assert sorted(pins(s).leases) == ["J0", "J1"] and pins(s).num_soft_blocks == 0


def test_blocked_admission_with_nothing_running_releases_pins() -> None:
    clock = FakeClock()
    s = _sched(clock, num_blocks=13, max_pinned_fraction=1.0, ttl=100.0, max_model_len=48)
    runner = FakeRunner()
    for j in range(3):  # three jobs pin 3 blocks each: 9 of 12 blocks
        s.add_request(_turn(f"r{j}", f"J{j}", [j * 10 + k for k in range(9)], float(j), float(j)))
        _finish_turn(s, runner, f"r{j}")
        clock.advance(1.0)
    assert pins(s).num_pinned_blocks == 9
    s.add_request(make_request("big", [200 + k for k in range(30)], 2, t=5.0))  # needs 8 blocks
    out = s.schedule()
    assert [r.request_id for r in out.scheduled] == ["big"]
    assert pins(s).counters.early_released == 2
    # The lease expected back latest (J2, pinned last) went first; J0 kept its pin.
    assert pins(s).has_lease("J0") and not pins(s).has_lease("J2")
    check_invariants(s)


def test_release_job_and_abort_end_pins() -> None:
    clock = FakeClock()
    s = _sched(clock)
    runner = FakeRunner()
    s.add_request(_turn("t1", "job", list(range(10)), 0.0, 0.0))
    toks = _finish_turn(s, runner, "t1")
    assert s.policy.holds_leases() and s.stats().num_pinned_jobs == 1  # what the idle loop asks
    assert s.release_job("job") and not s.release_job("job")  # idempotent
    assert not s.policy.holds_leases()
    assert pins(s).counters.released == 1 and s.stats().blocks_in_use == 0
    s.add_request(_turn("t2", "job", toks + [1], 1.0, 0.0))
    _finish_turn(s, runner, "t2")
    assert pins(s).has_lease("job")
    s.add_request(_turn("t3", "job", toks + [1, 2, 3, 4, 5, 6], 2.0, 0.0, max_tokens=30))
    s.abort_requests(["t3"])
    assert not pins(s).has_lease("job") and pins(s).counters.aborted == 1
    assert s.stats().blocks_in_use == 0
    check_invariants(s)


def test_last_step_is_never_pinned() -> None:
    clock = FakeClock()
    s = _sched(clock)
    s.add_request(_turn("t1", "job", list(range(10)), 0.0, 0.0, last=True))
    _finish_turn(s, FakeRunner(), "t1")
    assert not pins(s).has_lease("job") and s.stats().blocks_in_use == 0


def test_pin_over_the_cap_keeps_the_prefix_that_fits() -> None:
    clock = FakeClock()
    s = _sched(clock, num_blocks=21, max_pinned_fraction=0.25, soft_pins=False)  # cap = 5 of 20 blocks
    runner = FakeRunner()
    s.add_request(_turn("a1", "A", [10 + k for k in range(9)], 0.0, 0.0))
    _finish_turn(s, runner, "a1")  # 3 hashed blocks pinned
    clock.advance(1.0)
    s.add_request(_turn("b1", "B", [50 + k for k in range(9)], 1.0, 1.0))
    toks = _finish_turn(s, runner, "b1")  # expected back after A: A keeps its lease, B gets 2 of 3 blocks
    assert len(pins(s).leases["A"].blocks) == 3 and len(pins(s).leases["B"].blocks) == 2
    assert pins(s).num_pinned_blocks == 5 and pins(s).counters.partial_cap == 1
    assert pins(s).counters.rejected_cap == 0
    check_invariants(s)
    # Churn evicts every unpinned block, B's freed third block included.
    s.add_request(make_request("churn", [200 + i for i in range(56)], 4, t=1.5))
    run_to_completion(s, runner)
    s.add_request(_turn("b2", "B", toks + [7, 7, 7], 2.0, 1.0))
    out = s.schedule()
    (sr,) = out.scheduled
    assert sr.num_computed_tokens == 8  # the pinned prefix; only the tail is re-prefilled
    assert s.requests["b2"].pin_hit and pins(s).counters.hit == 1
    check_invariants(s)


def _three_jobs_past_the_cap(clock: FakeClock, runner: FakeRunner) -> Scheduler:
    """Cap 5 of 20 blocks; A pins 3 hard, B 2 hard + 1 soft, C 3 soft (9 held, 11 free)."""
    s = _sched(clock, num_blocks=21, max_pinned_fraction=0.25)
    for j, job in enumerate("ABC"):
        s.add_request(_turn(f"{job}1", job, [100 * (j + 1) + k for k in range(9)], float(j), float(j)))
        _finish_turn(s, runner, f"{job}1")
        clock.advance(1.0)
    leases = pins(s).leases
    assert [(leases[j].num_hard, leases[j].num_soft) for j in "ABC"] == [(3, 0), (2, 1), (0, 3)]
    assert pins(s).num_pinned_blocks == 5 and pins(s).num_soft_blocks == 4
    assert pins(s).counters.partial_cap == 1 and pins(s).counters.rejected_cap == 1
    check_invariants(s)
    return s


def test_soft_tail_waits_for_later_jobs_and_yields_to_earlier_ones() -> None:
    clock = FakeClock()
    runner = FakeRunner()
    s = _three_jobs_past_the_cap(clock, runner)
    s.add_request(make_request("bg", [900, 901], 20, t=3.0))  # keeps the engine busy
    run_step(s, runner)
    # L started after every pinned job: its 11-block prompt does not fit the 10 free blocks, and the
    # soft tails belong to earlier jobs, so L waits for them rather than evicting them.
    s.add_request(_turn("L1", "L", [500 + k for k in range(44)], 3.0, 2.5))
    out, _ = run_step(s, runner)
    assert "L1" not in {r.request_id for r in out.scheduled}
    assert pins(s).counters.soft_yielded == 0 and pins(s).num_soft_blocks == 4
    # E started before B and C: it takes C's soft tail (the latest job first), not B's.
    s.add_request(_turn("E1", "E", [600 + k for k in range(44)], 3.5, 0.5))
    out, _ = run_step(s, runner)
    assert "E1" in {r.request_id for r in out.scheduled} and "L1" not in {r.request_id for r in out.scheduled}
    assert not pins(s).has_lease("C") and pins(s).counters.soft_yielded == 1
    assert (pins(s).leases["B"].num_hard, pins(s).leases["B"].num_soft) == (2, 1)
    assert pins(s).num_pinned_blocks == 5  # soft tails never touch the hard pins
    check_invariants(s)
    run_to_completion(s, runner)  # nothing deadlocks: with nothing running, L takes what it needs
    check_invariants(s)
    assert s.kv.pool.num_used_blocks == pins(s).num_pinned_blocks + pins(s).num_soft_blocks


def test_running_request_takes_soft_tails_before_pins() -> None:
    clock = FakeClock()
    runner = FakeRunner()
    s = _three_jobs_past_the_cap(clock, runner)
    # 40 prompt + 12 output tokens: 13 blocks, two more than are free.
    s.add_request(make_request("big", [700 + k for k in range(40)], 12, t=3.0))
    run_to_completion(s, runner)
    # The latest job's tail went; C's lease was all soft, so it ended (counted as an early release).
    assert pins(s).counters.soft_yielded == 1 and not pins(s).has_lease("C")
    assert s.num_preemptions == 0 and pins(s).counters.early_released == 1
    assert [len(pins(s).leases[j].blocks) for j in "AB"] == [3, 3] and pins(s).num_pinned_blocks == 5
    check_invariants(s)


def test_displaced_lease_becomes_soft_instead_of_released() -> None:
    from scheduler.block_pool import KVCacheBlock

    def hashed(first: int) -> list[KVCacheBlock]:
        blocks = [KVCacheBlock(first + i) for i in range(3)]
        for b in blocks:
            b.block_hash, b.ref_cnt = b.block_id, 1
        return blocks

    for soft in (False, True):
        released: list[KVCacheBlock] = []
        table = LeaseTable(max_pinned_blocks=4, release_fn=released.extend, soft=soft)
        x, y = hashed(1), hashed(10)
        assert table.pin("X", "rx", x, ttl=10.0, now=0.0, job_arrival_time=0.0) == 3
        # Y is expected back sooner than X: X's lease gives way to it.
        assert table.pin("Y", "ry", y, ttl=1.0, now=0.0, job_arrival_time=1.0) == 3
        assert table.num_pinned_blocks == 3 and table.leases["Y"].num_hard == 3
        if not soft:
            assert "X" not in table.leases and released == x and table.counters.early_released == 1
            continue
        # X keeps its blocks as a soft tail: out of the cap, yielding to anyone ranked before it.
        assert table.leases["X"].blocks == x and table.leases["X"].num_hard == 0 and not released
        assert table.num_soft_blocks == 3 and table.counters.early_released == 0
        assert not table.yield_soft_tail(0.5, after_job_arrival=0.0)  # X is not later than rank 0
        assert not table.yield_soft_tail(0.5, exclude_job="X")
        assert table.yield_soft_tail(0.5, after_job_arrival=-1.0)
        assert "X" not in table.leases and released == x and table.num_soft_blocks == 0
        assert table.counters.soft_yielded == 1 and table.counters.soft_block_seconds == 1.5


def test_expired_pin_stays_soft_for_the_grace_then_ends() -> None:
    s, clock, _, _ = _pinned_job(5.0, soft_pin_grace=2.0)
    created = clock.now()
    clock.set(created + 5.0)
    s.schedule()
    # The TTL ran out: its three blocks are now a soft tail, out of the cap, until 2 s later.
    assert (pins(s).has_lease("job") and pins(s).leases["job"].state is LeaseState.GRACE
            and pins(s).counters.expired == 0)
    assert pins(s).num_pinned_blocks == 0 and pins(s).num_soft_blocks == 3
    clock.set(created + 6.99)
    s.schedule()
    assert pins(s).has_lease("job")
    clock.set(created + 7.0)
    s.schedule()
    assert not pins(s).has_lease("job") and pins(s).counters.expired == 1 and s.kv.pool.num_cached_free == 3
    # 3 blocks x 5 s pinned, then 3 blocks x 2 s soft.
    assert pins(s).counters.pinned_block_seconds == 15.0 and pins(s).counters.soft_block_seconds == 6.0
    check_invariants(s)


def test_grace_is_counted_from_the_ttl_end_not_from_a_late_sweep() -> None:
    s, clock, runner, _ = _pinned_job(5.0, soft_pin_grace=2.0)
    created = clock.now()
    clock.set(created + 6.0)  # the first step after the TTL comes 1 s late: 1 s of grace is left
    s.schedule()
    assert pins(s).leases["job"].grace_ends_at == created + 7.0
    # Another job's pin; the first sweep after its TTL comes past its grace's end too: it just ends.
    s.add_request(_turn("u1", "other", [50 + k for k in range(10)], clock.now(), 1.0))
    _finish_turn(s, runner, "u1")
    clock.set(clock.now() + 100.0)
    s.schedule()
    assert not pins(s).leases and pins(s).counters.expired == 2
    check_invariants(s)


def test_grace_keeps_an_overdue_job_cache_from_a_later_job() -> None:
    for grace, expect_cached in ((2.0, 12), (0.0, 0)):
        s, clock, runner, toks = _pinned_job(1.0, soft_pin_grace=grace)
        clock.advance(1.5)  # the TTL ran out; the tool is still running
        s.add_request(make_request("bg", [900, 901], 20, t=clock.now()))  # keeps the engine busy
        run_step(s, runner)
        # A later job wants every block: with the grace it waits, without it evicts the job's cache.
        s.add_request(_turn("L1", "L", [500 + k for k in range(58)], clock.now(), 5.0, max_tokens=1))
        run_step(s, runner)
        admitted = s.requests.get("L1") is None or s.requests["L1"].status.name == "RUNNING"
        assert admitted == (grace == 0.0), grace
        if admitted:
            while "L1" in s.requests:
                run_step(s, runner)
        s.add_request(_turn("t2", "job", toks + [7, 7, 7], clock.now(), 0.0))
        while s.requests["t2"].num_cached_tokens < 0:
            run_step(s, runner)
        assert s.requests["t2"].num_cached_tokens == expect_cached, grace
        c = pins(s).counters
        assert c.late_hit == (1 if grace else 0) and c.hit == (1 if grace else 0)
        check_invariants(s)


def test_blocked_admission_gives_up_no_soft_tail_when_that_would_not_be_enough() -> None:
    clock = FakeClock()
    runner = FakeRunner()
    s = _three_jobs_past_the_cap(clock, runner)
    s.add_request(make_request("bg", [900, 901], 20, t=3.0))
    run_step(s, runner)
    # F started first of all, but needs 15 blocks: 10 are free and only 4 are soft. Taking them
    # would not admit it, so every soft tail stays.
    s.add_request(_turn("F1", "F", [600 + k for k in range(60)], 3.5, 0.2))
    out, _ = run_step(s, runner)
    assert "F1" not in {r.request_id for r in out.scheduled}
    assert pins(s).counters.soft_yielded == 0 and pins(s).num_soft_blocks == 4
    check_invariants(s)


def test_soft_pin_flags_and_validation() -> None:
    import argparse

    import pytest

    from agent_engine.config import EngineConfig

    p = argparse.ArgumentParser()
    EngineConfig.add_arguments(p)
    cfg = EngineConfig.from_args(p.parse_args(["--no-soft-pins", "--soft-pin-grace", "0.5"]))
    assert cfg.soft_pins is False and cfg.soft_pin_grace == 0.5
    default = EngineConfig.from_args(p.parse_args([]))
    assert default.soft_pins is True and default.soft_pin_grace == 2.0
    with pytest.raises(ValueError):
        EngineConfig(soft_pin_grace=-1.0)
    with pytest.raises(ValueError):
        SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, soft_pin_grace=float("nan"))
    s = _sched(FakeClock(), soft_pins=False)
    assert not pins(s).soft
