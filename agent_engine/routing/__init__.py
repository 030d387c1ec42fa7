"""Routing between engine replicas: pure policies shared by the Ray Serve routers and the simulator.

Modules: ``views`` (what a policy sees: ``RouteKey``, ``ReplicaView``; ``RoutingCounters``),
``prefix`` (prompt prefix chains, the router-side ``PrefixIndex``), ``policies`` (job affinity with
bounded load, power of two, round robin), ``config`` (``ClusterConfig``: the cluster flags),
``reuse`` (next-turn reuse, the metric the routing comparison reports).

Invariant: standard library only. Nothing here imports Ray, torch or the engine, so the simulator,
the server's flags and the unit tests use it without either.
"""

from agent_engine.routing.cluster_config import ClusterConfig
from agent_engine.routing.policies import (
    ROUTERS,
    AffinityPolicy,
    PowerOfTwoPolicy,
    RoundRobinPolicy,
    RoutingPolicy,
    make_policy,
)
from agent_engine.routing.prefix import PrefixIndex, text_chain
from agent_engine.routing.reuse import next_turn_reuse
from agent_engine.routing.views import ReplicaView, RouteKey, RoutingCounters

__all__ = [
    "ROUTERS", "AffinityPolicy", "ClusterConfig", "PowerOfTwoPolicy", "PrefixIndex", "ReplicaView",
    "RoundRobinPolicy", "RouteKey", "RoutingCounters", "RoutingPolicy", "make_policy", "next_turn_reuse",
    "text_chain",
]
