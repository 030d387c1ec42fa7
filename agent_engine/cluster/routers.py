"""Ray Serve request routers for the engine deployment: job affinity, and Ray's power of two and round robin.

``AffinityRequestRouter`` runs ``routing.AffinityPolicy`` (the same code the simulator runs) inside
Ray Serve's ``RequestRouter`` API: ``choose_replicas`` builds one ``ReplicaView`` per candidate
replica and returns two ranks, the chosen replica alone, then the others by load (Ray takes the
second rank only when the first cannot take the request). A replica's view is:

- queue: the larger of Ray's cached queue length of the replica (its ongoing requests, as the replica
  reported them) and this router's own count of requests it routed there that have not completed;
- leases, active jobs, free blocks, ``stats_at``: the replica's ``record_routing_stats`` report (sent
  every ``request_routing_stats_period_s``), plus the jobs this router has in flight there.

``PowerOfTwoRequestRouter`` and ``RoundRobinRequestRouter`` are Ray's own power-of-two-choices and
round-robin routers; all three share ``_ClusterRouting``: the request's ``RouteKey`` travels as the
``route`` keyword argument of the handle call, routed requests are tracked until Ray reports them
complete, replicas that die or leave are forgotten, and each router registers itself in this
process (``registry``) so the ingress can serve its counters and view.

Invariants: no routing decision blocks (no I/O in ``choose_replicas``); a request without a
``route`` (a broadcast, a probe) is routed as one without a job; the in-flight table only holds
requests Ray accepted and drops them when Ray completes them.
"""

from __future__ import annotations

import time

from ray.serve._private.replica_result import ReplicaResult
from ray.serve._private.request_router import PowerOfTwoChoicesRequestRouter
from ray.serve.experimental.round_robin_router import RoundRobinRouter
from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from agent_engine.cluster import registry
from agent_engine.json_types import JsonObject
from agent_engine.routing import AffinityPolicy, ReplicaView, RouteKey, RoutingCounters
from agent_engine.routing.policies import DEFAULT_MAX_IMBALANCE

__all__ = ["ROUTER_CLASSES", "AffinityRequestRouter", "PowerOfTwoRequestRouter", "RoundRobinRequestRouter"]

STATS_SLACK_S = 0.25  # stats must be this much newer than a routing to prove a lease ended (clock skew)


def _route_of(pr: PendingRequest | None) -> RouteKey | None:
    route = pr.kwargs.get("route") if pr is not None else None
    return route if isinstance(route, RouteKey) else None


class _ClusterRouting:
    """What the three routers share: in-flight tracking, counters, the registry, forgetting replicas."""

    counters: RoutingCounters

    def __init__(self, *args: object, **kwargs: object) -> None:  # Ray's router arguments, passed on
        super().__init__(*args, **kwargs)
        self.counters = RoutingCounters()
        self._inflight: dict[str, tuple[str, str | None]] = {}  # internal request id -> (replica, job)
        registry.register(self._deployment_id.name, self)  # type: ignore[attr-defined]

    def _forget(self, replica_id: str) -> None:
        """Hook: a replica died or left."""

    def inflight_by_replica(self) -> dict[str, tuple[int, set[str]]]:
        """Per replica: requests this router routed there and not completed, and their jobs."""
        out: dict[str, tuple[int, set[str]]] = {}
        for rid, job in list(self._inflight.values()):
            n, jobs = out.get(rid, (0, set()))
            if job is not None:
                jobs.add(job)
            out[rid] = (n + 1, jobs)
        return out

    def view(self) -> JsonObject:
        """The router's counters and, per live replica, its queue and last routing stats (for the ingress)."""
        replicas = {}
        inflight = self.inflight_by_replica()
        for rid, r in list(self.curr_replicas.items()):  # type: ignore[attr-defined]
            stats = dict(r.routing_stats or {})
            replicas[rid.unique_id] = {
                "queue_len": self._queue_len(r, inflight), "leases": len(stats.get("leases", ())),
                "free_blocks": stats.get("free_blocks"), "stats_at": stats.get("at"), "pid": stats.get("pid"),
            }
        return {"router": type(self).__name__, "counters": self.counters.as_dict(), "replicas": replicas}

    def _queue_len(self, r: RunningReplica, inflight: dict[str, tuple[int, set[str]]]) -> int:
        cached = self.replica_queue_len_cache.get(r.replica_id)  # type: ignore[attr-defined]
        return max(cached or 0, inflight.get(r.replica_id.unique_id, (0, set()))[0])

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: ReplicaResult) -> None:
        super().on_request_routed(pending_request, replica_id, result)  # type: ignore[misc]
        route = _route_of(pending_request)
        if route is None:
            return
        self._inflight[pending_request.metadata.internal_request_id] = (replica_id.unique_id, route.job_id)
        self._routed(route, replica_id.unique_id)

    def _routed(self, route: RouteKey, replica_id: str) -> None:
        """Hook: Ray accepted ``route``'s request on ``replica_id``."""

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        self._inflight.pop(internal_request_id, None)
        super().on_request_completed(replica_id, internal_request_id)  # type: ignore[misc]

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)  # type: ignore[misc]
        self._forget(replica_id.unique_id)

    def update_replicas(self, replicas: list[RunningReplica]) -> None:
        before = {rid.unique_id for rid in self.curr_replicas}  # type: ignore[attr-defined]
        super().update_replicas(replicas)  # type: ignore[misc]
        for gone in before - {r.replica_id.unique_id for r in replicas}:
            self._forget(gone)


class AffinityRequestRouter(_ClusterRouting, RequestRouter):
    """Job affinity with bounded load (``routing.AffinityPolicy``); see the module docstring."""

    def initialize_state(self, max_imbalance: int = DEFAULT_MAX_IMBALANCE, **kwargs: object) -> None:
        self.policy = AffinityPolicy(max_imbalance=max_imbalance, stats_slack_s=STATS_SLACK_S)
        self.counters = self.policy.counters

    def _policy(self) -> AffinityPolicy:
        if not hasattr(self, "policy"):  # Ray calls initialize_state; be safe if it did not yet
            self.initialize_state()
        return self.policy

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        now = time.time()
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        order = self._policy().rank(_route_of(pending_request) or RouteKey(),
                                    self._views(candidate_replicas), now)
        ranks = [[by_id[order[0]]]]
        if len(order) > 1:
            ranks.append([by_id[rid] for rid in order[1:]])
        return ranks

    def _views(self, replicas: list[RunningReplica]) -> list[ReplicaView]:
        inflight = self.inflight_by_replica()
        views = []
        for r in replicas:
            rid = r.replica_id.unique_id
            stats = r.routing_stats or {}
            mine = inflight.get(rid, (0, set()))[1]
            views.append(ReplicaView(
                rid, self._queue_len(r, inflight), frozenset(stats.get("leases", ())),
                frozenset(stats.get("active_jobs", ())) | frozenset(mine), stats.get("free_blocks"),
                stats.get("at")))
        return views

    def _routed(self, route: RouteKey, replica_id: str) -> None:
        pol = self._policy()
        if route.job_id is not None and pol.home_of(route.job_id) != replica_id:
            pol.record(route.job_id, replica_id, time.time())  # Ray fell back to the second rank

    def _forget(self, replica_id: str) -> None:
        self._policy().forget_replica(replica_id)

    def forget_job(self, job_id: str) -> None:
        """The client released the job: its next request (if any) is a new job. Thread-safe: runs on
        the router's own event loop when it has one."""
        loop = self._lazily_fetched_loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._policy().forget_job, job_id)
        else:
            self._policy().forget_job(job_id)


class _CountingMixin:
    """Counts the decisions of Ray's own routers as ``spread``."""

    counters: RoutingCounters

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        if _route_of(pending_request) is not None:
            self.counters.routed += 1
            self.counters.spread += 1
        return await super().choose_replicas(candidate_replicas, pending_request)  # type: ignore[misc]

    def forget_job(self, job_id: str) -> None:
        pass


class PowerOfTwoRequestRouter(_CountingMixin, _ClusterRouting, PowerOfTwoChoicesRequestRouter):
    """Ray Serve's default power-of-two-choices router, with the cluster's bookkeeping."""


class RoundRobinRequestRouter(_CountingMixin, _ClusterRouting, RoundRobinRouter):
    """Ray Serve's round-robin router, with the cluster's bookkeeping."""


ROUTER_CLASSES: dict[str, type] = {
    "affinity": AffinityRequestRouter, "pow2": PowerOfTwoRequestRouter, "rr": RoundRobinRequestRouter,
}
