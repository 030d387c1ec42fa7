"""The Ray Serve affinity router on fake replicas: affinity kept, bounded-load fallback, a dead replica.

Skips when Ray Serve is not installed (the optional extra ``ray``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'agent-engine[ray]')")

from ray.serve._private.common import (  # noqa: E402
    DeploymentHandleSource,
    DeploymentID,
    ReplicaID,
    RequestMetadata,
)
from ray.serve.request_router import PendingRequest  # noqa: E402

from agent_engine.cluster.registry import routers_of  # noqa: E402
from agent_engine.cluster.routers import AffinityRequestRouter  # noqa: E402
from agent_engine.routing import RouteKey  # noqa: E402

pytestmark = pytest.mark.core

DEPLOYMENT = DeploymentID(name="FakeEngine", app_name="test")


class FakeReplica:
    """What ``choose_replicas`` reads of a replica: its id and its last routing stats."""

    def __init__(self, uid: str, **stats: Any) -> None:
        self.replica_id = ReplicaID(uid, DEPLOYMENT)
        self.routing_stats = stats


def _router(max_imbalance: int = 2) -> AffinityRequestRouter:
    r = AffinityRequestRouter(deployment_id=DEPLOYMENT, handle_source=DeploymentHandleSource.UNKNOWN,
                              use_replica_queue_len_cache=True)
    r.initialize_state(max_imbalance=max_imbalance)
    return r


def _pending(job: str) -> PendingRequest:
    meta = RequestMetadata(request_id=job, internal_request_id=uuid.uuid4().hex)
    return PendingRequest(args=[], kwargs={"route": RouteKey(job)}, metadata=meta)


async def _route(router: AffinityRequestRouter, replicas: list[FakeReplica], job: str) -> tuple[str, str]:
    """Choose for one request of ``job``, let Ray 'accept' it on the first rank; (replica, request id)."""
    pr = _pending(job)
    ranks = await router.choose_replicas(replicas, pr)  # type: ignore[arg-type]
    chosen = ranks[0][0]
    assert len(ranks[0]) == 1 and sum(len(r) for r in ranks) == len(replicas)
    router.on_request_routed(pr, chosen.replica_id, None)
    return chosen.replica_id.unique_id, pr.metadata.internal_request_id


def _done(router: AffinityRequestRouter, replica: str, request_id: str) -> None:
    router.on_request_completed(ReplicaID(replica, DEPLOYMENT), request_id)


def test_affinity_is_kept_while_the_lease_lives_and_reported() -> None:
    async def run() -> None:
        router = _router()
        a, b = FakeReplica("a", free_blocks=10), FakeReplica("b", free_blocks=20)
        home, rid = await _route(router, [a, b], "job")
        assert home == "b"  # new job: equal load, more free blocks
        # while its turn runs, the router's own in-flight table keeps the job home
        again, rid2 = await _route(router, [a, b], "job")
        assert again == home
        for r in (rid, rid2):
            _done(router, home, r)
        # later the replica reports the lease: still home, although the other replica is idle too
        b.routing_stats = {"leases": ["job"], "free_blocks": 5, "at": time.time() + 1}
        assert (await _route(router, [a, b], "job"))[0] == "b"
        assert router.counters.affinity == 2 and router.counters.new_jobs == 1
        assert router in routers_of("FakeEngine")
        assert router.view()["counters"]["routed"] == 3

    asyncio.run(run())


def test_an_overloaded_home_falls_back_to_the_least_loaded_replica() -> None:
    async def run() -> None:
        router = _router(max_imbalance=2)
        a, b = FakeReplica("a"), FakeReplica("b")
        home, _ = await _route(router, [a, b], "job")
        other = "a" if home == "b" else "b"
        busy = FakeReplica(home, leases=["job"], at=time.time() + 1)
        router.replica_queue_len_cache.update(busy.replica_id, 6)  # Ray's cached queue: 6 vs 0
        assert (await _route(router, [busy, FakeReplica(other)], "job"))[0] == other
        assert router.counters.overload_fallbacks == 1

    asyncio.run(run())


def test_a_dead_replica_is_forgotten_and_its_jobs_move() -> None:
    async def run() -> None:
        router = _router()
        a, b = FakeReplica("a"), FakeReplica("b")
        home, rid = await _route(router, [a, b], "job")
        survivor = b if home == "a" else a
        router.on_replica_actor_died(ReplicaID(home, DEPLOYMENT))
        _done(router, home, rid)
        assert (await _route(router, [survivor], "job"))[0] == survivor.replica_id.unique_id
        assert router.counters.lost_leases == 1
        assert router.inflight_by_replica() == {survivor.replica_id.unique_id: (1, {"job"})}

    asyncio.run(run())


def test_the_serve_application_builder_takes_the_serve_flags() -> None:
    from agent_engine.cluster.ray_app import app_builder, args_to_flags, parse_flags

    flags = args_to_flags({"replicas": 3, "router": "pow2", "num_kv_blocks": 64, "soft-pins": False,
                           "infer_jobs": "true"})
    assert flags == ["--replicas", "3", "--router", "pow2", "--num-kv-blocks", "64", "--no-soft-pins",
                     "--infer-jobs"]
    engine, server, cluster = parse_flags(flags)
    assert (cluster.replicas, cluster.router) == (3, "pow2")
    assert (engine.num_kv_blocks, engine.soft_pins) == (64, False)
    assert server.port == 8000
    app = app_builder({"replicas": 2, "num-kv-blocks": 32})
    assert type(app).__name__ == "Application"
    with pytest.raises(ValueError, match="router"):
        parse_flags(["--router", "random"])
    with pytest.raises(ValueError, match="unrecognized"):
        parse_flags(["--no-such-flag"])
