"""What a routing policy sees: one request's key, each replica's load and leases, and its counters.

Invariants:
- Pure data, standard library only: the Ray request routers (``agent_engine.cluster``) and the
  simulator (``agent_engine.sim.cluster``) fill these from their own sources, and the policies
  (``routing.policies``) never learn which one called them.
- ``ReplicaView.queue_len`` counts the requests sent to the replica and not finished (waiting or
  running there); ``leases`` are the job ids holding a CONTINUUM lease (or blocks in the second KV tier) there and ``active_jobs`` those
  with a request there now, both as of ``stats_at`` (on the caller's clock; ``None``: never reported);
  ``free_blocks`` None is unknown (not reported yet).
- ``RoutingCounters`` only grow; every routed request bumps ``routed`` once and exactly one of
  ``affinity``, ``placed`` (no usable home: new job, lease ended, lost or overloaded) or ``spread``
  (policies without affinity).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class RouteKey:
    """The routing-relevant facts of one request.

    ``job_id`` comes from the hints the server reads (``server.hints.resolve_job``), None without any;
    ``prefix`` is the chained hash of each whole chunk of the prompt (``routing.prefix``)."""

    job_id: str | None = None
    prefix: tuple[Hashable, ...] = ()


@dataclass(frozen=True)
class ReplicaView:
    """One live replica as the router sees it at routing time."""

    replica_id: str
    queue_len: int = 0
    leases: frozenset[str] = frozenset()
    active_jobs: frozenset[str] = frozenset()
    free_blocks: int | None = None
    stats_at: float | None = None


@dataclass
class RoutingCounters:
    """Decisions of one routing policy (monotonic; ``as_dict`` for metrics and JSON)."""

    routed: int = 0
    affinity: int = 0          # sent to the replica holding the job's lease (or running its last turn)
    placed: int = 0            # no usable home: sent to the least loaded replica with the best prefix
    spread: int = 0            # power-of-two / round-robin decisions
    new_jobs: int = 0          # a job id never seen before
    ended_leases: int = 0      # the home's fresh stats show no lease and no request of the job
    lost_leases: int = 0       # the home replica is gone (dead or removed)
    overload_fallbacks: int = 0  # the home's queue exceeded the least loaded by more than the bound
    prefix_matched: int = 0    # placed on a replica that held part of the prompt's prefix
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        d = asdict(self)
        extra = d.pop("extra")
        return {**d, **extra}
