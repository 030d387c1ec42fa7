"""Prefetch from the second tier (``scheduler.kv_prefetch``): a demoted job's blocks go back up into
empty pool blocks before its predicted return, once per pending turn, never while work waits."""

from __future__ import annotations

import pytest

from scheduler import FakeClock, FakeRunner, Scheduler, SchedulerConfig
from scheduler.invariants import check_invariants
from scheduler.tier_copy import LOAD, PREFETCH, SAVE
from tests.sched_helpers import StubEstimator, make_request, run_to_completion

pytestmark = pytest.mark.core

FIRST = list(range(100, 116))  # job a's first turn: 4 full blocks of 4


def _scheduler(returns: dict[str, float | None], clock: FakeClock, horizon: float = 2.0, seats: int = 8) -> Scheduler:
    cfg = SchedulerConfig(num_blocks=9, block_size=4, max_model_len=32, num_offload_blocks=8, prefetch_horizon=horizon,
                          max_num_seqs=seats)
    asked: list[tuple[str, str | None]] = []

    def return_time(job: str, tenant: str | None) -> float | None:
        asked.append((job, tenant))
        return returns.get(job)

    s = Scheduler(cfg, clock=clock, estimator=StubEstimator(returns=return_time))  # no pins: TTL 0
    s._asked = asked  # type: ignore[attr-defined]
    return s


def _demote_job_a(s: Scheduler, runner: FakeRunner, clock: FakeClock) -> int:
    """Job a's turn runs, then job b's long turn evicts a's cached blocks into the tier; returns how many."""
    s.add_request(make_request("a1", FIRST, max_tokens=1, t=0.0, job_id="a", tenant="t1"))
    run_to_completion(s, runner)
    clock.advance(1.0)
    s.add_request(make_request("b1", list(range(200, 228)), max_tokens=1, t=1.0, job_id="b", is_last_step=True))
    out = s.schedule()
    saves = sum(c[0] == SAVE for c in out.kv_copies)
    s.update(out, runner.execute(out))
    run_to_completion(s, runner)
    assert saves and len(s.kv.tier.entries_of("a")) == saves
    return saves


def test_a_job_due_back_is_prefetched_and_its_turn_hits_the_pool_without_a_load() -> None:
    clock = FakeClock()
    s = _scheduler({"a": 10.0}, clock)
    runner = FakeRunner()
    saved = _demote_job_a(s, runner, clock)
    out = s.schedule()  # now 1.0: a is expected at 10.0, beyond the 2 s horizon
    assert not out.kv_copies and s.kv.tier.entries_of("a")
    clock.advance(7.5)  # 8.5: due within the horizon
    out = s.schedule()
    assert [c[0] for c in out.kv_copies] == [PREFETCH] * saved
    assert not s.kv.tier.entries and s.kv.tier.counters.prefetched == saved
    assert s.held_jobs() == ["a"] and s.kv.tier.holds_job("a")  # still warm: its KV waits in this pool
    assert ("a", "t1") in s._asked  # the job's own tenant's estimator is asked
    check_invariants(s)
    clock.advance(1.0)
    s.add_request(make_request("a2", FIRST + [7, 7, 7, 7], max_tokens=1, t=clock.now(), job_id="a", tenant="t1"))
    out = s.schedule()
    assert not [c for c in out.kv_copies if c[0] in (LOAD, PREFETCH)]
    assert s.requests["a2"].num_cached_tokens == 16  # pool hits: the prefetch served the whole prefix
    assert not s.kv.tier.holds_job("a")
    check_invariants(s)


def test_no_prefetch_while_a_turn_waits_for_unknown_returns_or_with_a_zero_horizon() -> None:
    for returns, horizon in (({"a": None}, 2.0), ({"a": 1.0}, 0.0)):
        clock = FakeClock()
        s = _scheduler(returns, clock, horizon)
        _demote_job_a(s, FakeRunner(), clock)
        assert not s.schedule().kv_copies and s.kv.tier.entries_of("a")
    clock = FakeClock()
    s = _scheduler({"a": 1.0}, clock, seats=1)
    runner = FakeRunner()
    _demote_job_a(s, runner, clock)
    s.add_request(make_request("r1", [1, 2], max_tokens=5, t=1.0, job_id="r"))
    s.add_request(make_request("w1", [3, 4], max_tokens=1, t=1.0, job_id="w"))  # no seat: it waits
    for _ in range(3):
        out = s.schedule()
        assert len(s.waiting) and not [c for c in out.kv_copies if c[0] == PREFETCH]
        s.update(out, runner.execute(out))
    assert s.kv.tier.counters.prefetched == 0
    check_invariants(s)


def test_a_job_is_prefetched_once_per_pending_turn() -> None:
    clock = FakeClock()
    s = _scheduler({"a": 1.5}, clock)
    runner = FakeRunner()
    saved = _demote_job_a(s, runner, clock)
    out = s.schedule()
    assert sum(c[0] == PREFETCH for c in out.kv_copies) == saved
    # Another job's long turn evicts the prefetched blocks again: they are demoted, not prefetched again.
    s.add_request(make_request("d1", list(range(400, 428)), max_tokens=1, t=1.0, job_id="d", is_last_step=True))
    run_to_completion(s, runner)
    assert s.kv.tier.entries_of("a")
    for _ in range(3):
        out = s.schedule()
        assert not [c for c in out.kv_copies if c[0] == PREFETCH]
    c = s.kv.tier.counters
    assert c.stored == c.reloaded + c.dropped + c.cleared + len(s.kv.tier.entries)
    check_invariants(s)
