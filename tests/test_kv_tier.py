"""The second KV tier: its index (``scheduler.kv_tier``), the scheduler's demote-on-evict and
load-on-hit, and the bytes (``kernels.kv_offload``)."""

from __future__ import annotations

import pytest

from agent_engine.config import EngineConfig, parse_size
from scheduler import FakeClock, FakeRunner
from scheduler.invariants import check_invariants
from scheduler.kv_tier import KVTier
from scheduler.tier_copy import LOAD, SAVE
from tests.sched_helpers import make_request, make_scheduler, run_to_completion

pytestmark = pytest.mark.core


def _tier_with(entries: list[tuple[int, str | None, float]], slots: int) -> KVTier:
    tier = KVTier(slots)
    tier.jobs.listen(tier)
    for h, job, t in entries:
        assert tier.save(h, 100 + h, job, t)
    return tier


def _turn_arrived(tier: KVTier, job: str, t: float) -> None:
    """A turn of ``job`` arrives at ``t``: its entries are worth more than idler jobs'."""
    tier.jobs.arrive(make_request(f"{job}@{t}", [1, 2], job_id=job, t=t), t)


def _job_released(tier: KVTier, job: str) -> None:
    """The client ends ``job``: its entries are worth nothing."""
    tier.jobs.release(job, 0.0)


def test_entries_move_down_and_up_once_with_ordered_copies() -> None:
    tier = _tier_with([(1, "a", 0.0), (2, "a", 0.0)], slots=2)
    tier.load(1, 7)
    assert 1 not in tier and 2 in tier
    assert tier.save(3, 9, "b", 1.0)  # refills the slot the load freed, after the load in the list
    assert tier.take_copies() == [(SAVE, 101, 0), (SAVE, 102, 1), (LOAD, 0, 7), (SAVE, 9, 0)]
    assert tier.take_copies() == []
    c = tier.counters
    assert (c.stored, c.reloaded, c.dropped) == (3, 1, 0)
    assert not tier.save(3, 11, "b", 2.0)  # a hash the tier holds is never saved twice


def test_eviction_is_job_aware_done_jobs_first_then_the_idlest_job() -> None:
    tier = _tier_with([(1, "old", 0.0), (2, "new", 0.0), (3, "done", 0.0)], slots=3)
    _turn_arrived(tier, "old", 1.0)
    _turn_arrived(tier, "new", 5.0)
    _job_released(tier, "done")
    assert tier.save(4, 104, "c", 6.0)  # the done job's entry goes first
    assert 3 not in tier
    assert tier.save(5, 105, "c", 6.0)  # then the idlest job's ("old", active at 1.0)
    assert 1 not in tier and 2 in tier
    _turn_arrived(tier, "c", 2.0)
    # Every entry left is worth more than a block of a job idle since 0.5: the demotion is refused.
    _turn_arrived(tier, "idle", 0.5)
    assert not tier.save(6, 106, "idle", 7.0)
    assert tier.counters.refused == 1 and tier.counters.dropped == 2
    _job_released(tier, "idle")
    assert not tier.save(7, 107, "idle", 7.0)  # a done job's blocks are never demoted


def test_protected_entries_survive_evictions_and_discard_drops_a_recomputed_copy() -> None:
    tier = _tier_with([(1, "a", 0.0), (2, "b", 1.0)], slots=2)
    with tier.protecting([1]):
        assert tier.save(3, 103, "c", 5.0)
    assert 1 in tier and 2 not in tier
    tier.discard(1)
    tier.discard(99)  # not there: nothing happens
    c = tier.counters
    assert 1 not in tier and c.dropped == 2 and c.stored == c.reloaded + c.dropped + len(tier.entries)


def _turn(rid: str, prompt: list[int], job: str, t: float, **kw):
    return make_request(rid, prompt, max_tokens=1, t=t, job_id=job, **kw)


def test_a_job_evicted_from_the_pool_loads_back_from_the_tier() -> None:
    clock = FakeClock()
    s = make_scheduler(num_blocks=9, block_size=4, clock=clock, num_offload_blocks=8, max_model_len=32)
    runner = FakeRunner()
    first = list(range(100, 116))  # 4 full blocks
    s.add_request(_turn("a1", first, "a", 0.0))
    run_to_completion(s, runner)
    s.add_request(_turn("b1", list(range(200, 228)), "b", 1.0))  # 7 blocks: evicts a's cached blocks
    out = s.schedule()
    saves = [c for c in out.kv_copies if c[0] == SAVE]
    assert saves and all(c[0] == SAVE for c in out.kv_copies)
    s.update(out, runner.execute(out))
    run_to_completion(s, runner)
    check_invariants(s)
    assert s.held_jobs() == ["a"]  # no lease under FCFS, but its blocks wait in the tier: routers send it back here
    nxt = first + [1000 + 17 % 7, 7, 7, 7]  # the job's next turn extends its context
    s.add_request(_turn("a2", nxt, "a", 2.0))
    out = s.schedule()
    loads = [c for c in out.kv_copies if c[0] == LOAD]
    assert len(loads) == len(saves)  # every demoted block of the job comes back
    assert {c[1] for c in loads} == {c[2] for c in saves}  # from the slots the saves filled
    (sr,) = out.scheduled
    assert sr.num_computed_tokens == 16 and len(sr.token_ids) == 4  # only the new tokens are computed
    assert s.requests["a2"].num_cached_tokens == 16
    check_invariants(s)


def test_tenants_never_hit_each_others_tier_entries() -> None:
    s = make_scheduler(num_blocks=9, block_size=4, num_offload_blocks=8, max_model_len=32)
    runner = FakeRunner()
    prompt = list(range(100, 116))
    s.add_request(_turn("x1", prompt, "x", 0.0, tenant="t1", cache_salt="t1"))
    run_to_completion(s, runner)
    s.add_request(_turn("y1", list(range(200, 228)), "y", 1.0, tenant="t1", cache_salt="t1"))
    run_to_completion(s, runner)
    assert s.kv.tier.entries
    s.add_request(_turn("z1", prompt + [1], "z", 2.0, tenant="t2", cache_salt="t2"))
    out = s.schedule()
    assert not [c for c in out.kv_copies if c[0] == LOAD]
    assert s.requests["z1"].num_cached_tokens == 0


def test_sizes_and_config_errors() -> None:
    assert parse_size("512M") == 512 * 1024**2 and parse_size("2GiB") == 2 * 1024**3 and parse_size("100") == 100
    for bad in ("", "-1", "lots", "1Q"):
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError):
        EngineConfig(kv_offload_bytes="ten")
    with pytest.raises(ValueError):
        EngineConfig(kv_offload_dtype="fp8")
    assert EngineConfig(kv_offload_bytes=2048).offload_bytes == 2048


def test_a_prefix_cache_reset_clears_the_tier_too() -> None:
    s = make_scheduler(num_blocks=9, block_size=4, num_offload_blocks=8, max_model_len=32)
    runner = FakeRunner()
    s.add_request(_turn("a1", list(range(100, 116)), "a", 0.0))
    run_to_completion(s, runner)
    s.add_request(_turn("b1", list(range(200, 228)), "b", 1.0))
    run_to_completion(s, runner)
    held = len(s.kv.tier.entries)
    assert held and s.kv.reset_prefix_cache()
    c = s.kv.tier.counters
    assert not s.kv.tier.entries and c.cleared == held and len(s.kv.tier.free_slots) == 8
    assert s.held_jobs() == []
    check_invariants(s)
