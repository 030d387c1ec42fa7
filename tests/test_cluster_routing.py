"""The routing policies on fake replicas: affinity kept, bounded-load fallback, dead replicas, prefixes."""

from __future__ import annotations

import argparse

import pytest

from agent_engine.routing import (
    AffinityPolicy,
    ClusterConfig,
    PowerOfTwoPolicy,
    PrefixIndex,
    ReplicaView,
    RoundRobinPolicy,
    RouteKey,
    make_policy,
    next_turn_reuse,
    text_chain,
)

pytestmark = pytest.mark.core


def views(*queues: int, leases: dict[int, set[str]] | None = None, stats_at: float | None = None,
          active: dict[int, set[str]] | None = None) -> list[ReplicaView]:
    leases, active = leases or {}, active or {}
    return [ReplicaView(f"r{i}", q, frozenset(leases.get(i, ())), frozenset(active.get(i, ())),
                        free_blocks=100, stats_at=stats_at) for i, q in enumerate(queues)]


def test_affinity_keeps_a_job_on_the_replica_holding_its_lease() -> None:
    pol = AffinityPolicy(max_imbalance=4)
    assert pol.rank(RouteKey("job-a"), views(3, 0, 1), now=0.0)[0] == "r1"  # new job: least loaded
    # r1 now reports the lease; it is busier than r0 but within the bound: the job stays
    for t in (10.0, 20.0, 30.0):
        got = pol.rank(RouteKey("job-a"), views(0, 3, 2, leases={1: {"job-a"}}, stats_at=t), now=t)
        assert got[0] == "r1"
    c = pol.counters
    assert (c.routed, c.affinity, c.placed, c.new_jobs) == (4, 3, 1, 1)


def test_affinity_trusts_its_own_routing_until_the_stats_catch_up() -> None:
    pol = AffinityPolicy(max_imbalance=4)
    assert pol.rank(RouteKey("j"), views(1, 0), now=10.0)[0] == "r1"
    # stats taken before the routing (t=5) cannot show the lease yet: the job stays home
    assert pol.rank(RouteKey("j"), views(0, 2, stats_at=5.0), now=11.0)[0] == "r1"
    # a request of the job still running there also keeps it home
    assert pol.rank(RouteKey("j"), views(0, 2, active={1: {"j"}}, stats_at=50.0), now=12.0)[0] == "r1"
    assert pol.counters.ended_leases == 0


def test_an_ended_lease_sends_the_job_to_the_best_prefix_match_within_the_bound() -> None:
    pol = AffinityPolicy(max_imbalance=4)
    chain = text_chain("x" * 2048)
    first = pol.rank(RouteKey("j", chain[:4]), views(0, 0, 0), now=0.0)[0]
    # fresh stats (t=100) show no lease of j anywhere: the lease ended; the prefix still leads to the
    # first replica, although it is the busiest, because it is within the bound
    loads = views(*(3 if f"r{i}" == first else 0 for i in range(3)), stats_at=100.0)
    assert pol.rank(RouteKey("j", chain), loads, now=100.0)[0] == first
    assert pol.counters.ended_leases == 1 and pol.counters.prefix_matched == 1
    # past the bound the load wins
    loads = views(*(9 if f"r{i}" == first else 0 for i in range(3)), stats_at=200.0)
    assert pol.rank(RouteKey("j", chain), loads, now=200.0)[0] != first


def test_bounded_load_falls_back_to_the_least_loaded_replica() -> None:
    pol = AffinityPolicy(max_imbalance=2)
    pol.rank(RouteKey("j"), views(0, 5, 5), now=0.0)
    home = views(9, 5, 6, leases={0: {"j"}}, stats_at=1.0)  # 9 - 5 > 2: overloaded
    got = pol.rank(RouteKey("j"), home, now=1.0)
    assert got[0] == "r1"
    assert pol.counters.overload_fallbacks == 1
    assert pol.home_of("j") == "r1"  # the next turn follows the job to its new replica
    ok = views(7, 5, 6, leases={0: {"j"}}, stats_at=2.0)  # 7 - 5 <= 2: the lease on r0 wins again
    assert pol.rank(RouteKey("j"), ok, now=2.0)[0] == "r0"


def test_a_dead_home_counts_a_lost_lease_and_the_job_moves() -> None:
    pol = AffinityPolicy()
    assert pol.rank(RouteKey("j", ("a", "b")), views(0, 1), now=0.0)[0] == "r0"
    survivors = [v for v in views(0, 1) if v.replica_id != "r0"]
    pol.forget_replica("r0")
    assert pol.rank(RouteKey("j", ("a", "b")), survivors, now=1.0) == ["r1"]
    assert pol.counters.lost_leases == 1
    assert pol.prefixes.match(("a", "b")) == {"r1": 2}


def test_hint_less_turns_follow_their_prefix_and_new_jobs_follow_load() -> None:
    pol = AffinityPolicy(max_imbalance=8)
    shared = "system prompt " * 40  # one whole shared chunk and more
    first = text_chain(shared + "job one: " + "a" * 1000)
    r_first = pol.rank(RouteKey(None, first), views(0, 0), now=0.0)[0]
    r_idle = "r1" if r_first == "r0" else "r0"
    busy_first = views(*(2 if f"r{i}" == r_first else 0 for i in range(2)))
    # a new job with an id shares the system prompt but goes to the idle replica
    assert pol.rank(RouteKey("new", text_chain(shared + "job two")), busy_first, now=0.1)[0] == r_idle
    # a hint-less turn that extends the first prompt follows its prefix to the busier replica
    later = text_chain(shared + "job one: " + "a" * 1000 + " tool output " * 50)
    assert pol.rank(RouteKey(None, later), busy_first, now=5.0)[0] == r_first


def test_new_jobs_spread_over_equally_loaded_replicas() -> None:
    pol = AffinityPolicy()
    firsts = {pol.rank(RouteKey(f"j{i}"), views(0, 0, 0, 0), now=float(i))[0] for i in range(4)}
    assert firsts == {"r0", "r1", "r2", "r3"}


def test_rank_lists_every_replica_once_and_rejects_none() -> None:
    for pol in (AffinityPolicy(), PowerOfTwoPolicy(seed=1), RoundRobinPolicy()):
        got = pol.rank(RouteKey("j"), views(2, 0, 1), now=0.0)
        assert sorted(got) == ["r0", "r1", "r2"]
        with pytest.raises(ValueError):
            pol.rank(RouteKey("j"), [], now=0.0)


def test_power_of_two_prefers_the_shorter_of_two_queues() -> None:
    pol = PowerOfTwoPolicy(seed=0)
    picks = [pol.rank(RouteKey(), views(5, 0), now=0.0)[0] for _ in range(20)]
    assert set(picks) == {"r1"}
    picks3 = [pol.rank(RouteKey(), views(0, 9, 9), now=0.0)[0] for _ in range(60)]
    assert picks3.count("r0") > 30  # r0 wins whenever it is drawn (2 of 3 pairs)


def test_round_robin_cycles_and_ignores_jobs() -> None:
    pol = RoundRobinPolicy()
    got = [pol.rank(RouteKey("same-job"), views(0, 0, 0), now=0.0)[0] for _ in range(6)]
    assert got == ["r0", "r1", "r2", "r0", "r1", "r2"]


def test_make_policy_names() -> None:
    assert make_policy("affinity", max_imbalance=3).max_imbalance == 3  # type: ignore[attr-defined]
    assert make_policy("pow2").name == "pow2" and make_policy("rr").name == "rr"
    with pytest.raises(ValueError, match="unknown router"):
        make_policy("random")


def test_text_chain_shares_exactly_the_common_whole_chunks() -> None:
    a = text_chain("abc" * 300, chunk_chars=64)
    b = text_chain("abc" * 300 + "more text " * 40, chunk_chars=64)
    assert len(a) == (900 // 64) and b[: len(a)] == a  # an extension keeps every whole chunk
    c = text_chain("abd" + "abc" * 299, chunk_chars=64)
    assert c[0] != a[0] and all(x != y for x, y in zip(a, c, strict=False))  # chained: one change moves all
    assert text_chain("x" * 63, chunk_chars=64) == ()
    assert text_chain("x" * 640, chunk_chars=64, limit=3) == text_chain("x" * 640, chunk_chars=64)[:3]
    with pytest.raises(ValueError):
        text_chain("x", chunk_chars=0)


def test_prefix_index_is_bounded_and_forgets_replicas() -> None:
    idx = PrefixIndex(max_entries=5)
    idx.insert(("a", "b", "c"), "r0")
    idx.insert(("a", "b", "d", "e"), "r1")
    assert idx.match(("a", "b", "c", "z")) == {"r0": 3, "r1": 2}
    assert len(idx) == 5
    idx.insert(("f", "g"), "r1")  # the least recently used hashes ("c", "d") go
    assert len(idx) == 5 and idx.match(("a", "b", "c")) == {"r0": 2, "r1": 2}
    idx.forget("r0")
    assert idx.match(("a", "b", "c")) == {"r1": 2}


def test_next_turn_reuse() -> None:
    # turn 2 reuses all of turn 1's 100 + 10 tokens; turn 3 only 60 of turn 2's 150 + 10
    assert next_turn_reuse([[(100, 10, 0), (150, 10, 110), (200, 5, 60)]]) == pytest.approx(170 / 270)
    assert next_turn_reuse([[(100, 10, 0)]]) is None
    assert next_turn_reuse([[(10, 0, 0), (20, 0, 999)]]) == 1.0  # capped at the previous context


def test_cluster_config_flags_and_errors() -> None:
    p = argparse.ArgumentParser()
    ClusterConfig.add_arguments(p)
    argv = ["--replicas", "2", "--router", "pow2", "--max-imbalance", "3"]
    cfg = ClusterConfig.from_args(p.parse_args(argv))
    assert (cfg.replicas, cfg.router, cfg.max_imbalance) == (2, "pow2", 3)
    assert ClusterConfig.from_args(p.parse_args([])) == ClusterConfig()
    for bad in ({"replicas": 0}, {"router": "x"}, {"max_imbalance": -1}, {"stats_period_s": 0.0}):
        with pytest.raises(ValueError):
            ClusterConfig(**bad)  # type: ignore[arg-type]
