"""Routing policies: which replica gets a request. Job affinity with bounded load, power of two, round robin.

``policy.rank(key, replicas, now)`` returns every live replica's id, best first; the caller sends the
request to the first one (the Ray router offers the rest as a fallback rank; the simulator takes the
first). ``forget_replica`` drops what a policy remembers of a replica that died.

Affinity (``AffinityPolicy``), in order:

1. The job's home: the replica whose fresh stats list the job's lease or a request of it, else the
   replica it last routed the job to while that replica's stats are older than the routing (they
   cannot show the lease yet). A home that is gone counts as a lost lease; a home whose fresh stats
   show neither counts as an ended lease.
2. Bounded load: the home is kept unless its queue exceeds the least loaded replica's by more than
   ``max_imbalance`` requests (an overload fallback).
3. Otherwise, among replicas within ``max_imbalance`` of the least loaded: for a job whose lease
   ended, was lost or overloaded its home, and for a request without a job id (its prefix is all
   that names its job), the one that was routed the longest prefix of the prompt, then the least
   loaded; for a new job the least loaded, then the longest prefix (a shared system prompt must not
   pull every new job onto one replica). Ties go to the most free blocks (when every candidate
   reported them), then rotate.

Invariants: a policy is pure Python and deterministic given its inputs (and its seed); ``rank`` of
an empty replica list is a ``ValueError``; every call bumps the counters as ``RoutingCounters`` says.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent_engine.routing.prefix import PrefixIndex
from agent_engine.routing.views import ReplicaView, RouteKey, RoutingCounters
from scheduler.job_table import MAX_JOBS

__all__ = ["ROUTERS", "AffinityPolicy", "PowerOfTwoPolicy", "RoundRobinPolicy", "RoutingPolicy",
           "make_policy"]

ROUTERS: tuple[str, ...] = ("affinity", "pow2", "rr")
DEFAULT_MAX_IMBALANCE = 8
DEFAULT_MAX_JOBS = MAX_JOBS  # the one bound on remembered jobs (scheduler.job_table)


class RoutingPolicy(Protocol):
    name: str
    counters: RoutingCounters

    def rank(self, key: RouteKey, replicas: Sequence[ReplicaView], now: float) -> list[str]: ...

    def forget_replica(self, replica_id: str) -> None: ...


def _check(replicas: Sequence[ReplicaView]) -> None:
    if not replicas:
        raise ValueError("no replica to route to")


def _by_load(replicas: Sequence[ReplicaView]) -> list[ReplicaView]:
    return sorted(replicas, key=lambda r: (r.queue_len, -(r.free_blocks or 0), r.replica_id))


@dataclass
class _Home:
    replica_id: str
    routed_at: float


class AffinityPolicy:
    """Job affinity with bounded load (see the module docstring).

    ``stats_slack_s``: a replica's stats must be this much newer than the job's last routing to prove
    that its lease ended (covers clock skew between the router and the replica)."""

    name = "affinity"

    def __init__(self, max_imbalance: int = DEFAULT_MAX_IMBALANCE, stats_slack_s: float = 0.0,
                 max_jobs: int = DEFAULT_MAX_JOBS, prefix_index: PrefixIndex | None = None) -> None:
        if max_imbalance < 0:
            raise ValueError("max_imbalance must be >= 0")
        self.max_imbalance = max_imbalance
        self.stats_slack_s = stats_slack_s
        self.max_jobs = max_jobs
        self.prefixes = prefix_index if prefix_index is not None else PrefixIndex()
        self.counters = RoutingCounters()
        self._homes: OrderedDict[str, _Home] = OrderedDict()
        self._turn = 0

    def rank(self, key: RouteKey, replicas: Sequence[ReplicaView], now: float) -> list[str]:
        _check(replicas)
        live = {r.replica_id: r for r in replicas}
        least = min(r.queue_len for r in replicas)
        new_job = key.job_id is not None and key.job_id not in self._homes
        home = self._home(key.job_id, live, now)
        chosen: str | None = None
        if home is not None:
            if live[home].queue_len - least <= self.max_imbalance:
                chosen = home
                self.counters.affinity += 1
            else:
                self.counters.overload_fallbacks += 1
        if chosen is None:
            chosen = self._place(key, replicas, least, load_first=new_job)
            self.counters.placed += 1
        self._remember(key, chosen, now)
        self.counters.routed += 1
        return [chosen] + [r.replica_id for r in _by_load(replicas) if r.replica_id != chosen]

    def forget_replica(self, replica_id: str) -> None:
        self.prefixes.forget(replica_id)

    def record(self, job_id: str, replica_id: str, now: float) -> None:
        """The job's request went to ``replica_id`` after all (the caller overrode the ranking)."""
        self._remember(RouteKey(job_id), replica_id, now)

    def forget_job(self, job_id: str) -> None:
        """The job is over (released): a later request with its id is a new job."""
        self._homes.pop(job_id, None)

    def home_of(self, job_id: str) -> str | None:
        """The replica the job was last routed to (None: unknown)."""
        h = self._homes.get(job_id)
        return h.replica_id if h else None

    def _home(self, job_id: str | None, live: dict[str, ReplicaView], now: float) -> str | None:
        """Step 1 of the module docstring; counts new jobs, lost and ended leases."""
        if job_id is None:
            return None
        last = self._homes.get(job_id)
        holders = [rid for rid, r in live.items() if job_id in r.leases or job_id in r.active_jobs]
        if holders:
            return last.replica_id if last is not None and last.replica_id in holders else holders[0]
        if last is None:
            self.counters.new_jobs += 1
            return None
        r = live.get(last.replica_id)
        if r is None:
            self.counters.lost_leases += 1
            return None
        if r.stats_at is None or r.stats_at < last.routed_at + self.stats_slack_s:
            return last.replica_id
        self.counters.ended_leases += 1
        return None

    def _place(self, key: RouteKey, replicas: Sequence[ReplicaView], least: int, load_first: bool) -> str:
        """Step 3: among replicas within the load bound, the best prefix match and the least loaded
        (``load_first``: load before prefix), then the most free blocks, then a rotating tie-break."""
        eligible = [r for r in replicas if r.queue_len - least <= self.max_imbalance]
        match = self.prefixes.match(key.prefix) if key.prefix else {}
        self._turn += 1
        ids = sorted(r.replica_id for r in eligible)
        rotation = {rid: (i - self._turn) % len(ids) for i, rid in enumerate(ids)}
        known = all(r.free_blocks is not None for r in eligible)  # else free blocks cannot break ties

        def score(r: ReplicaView) -> tuple[int, ...]:
            m, q, free = match.get(r.replica_id, 0), -r.queue_len, (r.free_blocks or 0) if known else 0
            turn = -rotation[r.replica_id]
            return (q, m, free, turn) if load_first else (m, q, free, turn)

        best = max(eligible, key=score)
        if match.get(best.replica_id, 0) > 0:
            self.counters.prefix_matched += 1
        return best.replica_id

    def _remember(self, key: RouteKey, replica_id: str, now: float) -> None:
        if key.prefix:
            self.prefixes.insert(key.prefix, replica_id)
        if key.job_id is None:
            return
        self._homes[key.job_id] = _Home(replica_id, now)
        self._homes.move_to_end(key.job_id)
        while len(self._homes) > self.max_jobs:
            self._homes.popitem(last=False)


class PowerOfTwoPolicy:
    """Two replicas drawn at random; the one with the shorter queue first (ties: random)."""

    name = "pow2"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self.counters = RoutingCounters()

    def rank(self, key: RouteKey, replicas: Sequence[ReplicaView], now: float) -> list[str]:
        _check(replicas)
        picks = self._rng.sample(list(replicas), min(2, len(replicas)))
        picks.sort(key=lambda r: (r.queue_len, self._rng.random()))
        first = picks[0].replica_id
        self.counters.routed += 1
        self.counters.spread += 1
        return [first] + [r.replica_id for r in _by_load(replicas) if r.replica_id != first]

    def forget_replica(self, replica_id: str) -> None:
        pass


class RoundRobinPolicy:
    """The replicas in id order, starting one further at every request."""

    name = "rr"

    def __init__(self) -> None:
        self._next = 0
        self.counters = RoutingCounters()

    def rank(self, key: RouteKey, replicas: Sequence[ReplicaView], now: float) -> list[str]:
        _check(replicas)
        ids = sorted(r.replica_id for r in replicas)
        start = self._next % len(ids)
        self._next += 1
        self.counters.routed += 1
        self.counters.spread += 1
        return ids[start:] + ids[:start]

    def forget_replica(self, replica_id: str) -> None:
        pass


def make_policy(name: str, *, max_imbalance: int = DEFAULT_MAX_IMBALANCE, seed: int | None = None,
                stats_slack_s: float = 0.0) -> RoutingPolicy:
    """The policy called ``name`` (one of ``ROUTERS``); ``ValueError`` on an unknown name."""
    if name == "affinity":
        return AffinityPolicy(max_imbalance=max_imbalance, stats_slack_s=stats_slack_s)
    if name == "pow2":
        return PowerOfTwoPolicy(seed)
    if name == "rr":
        return RoundRobinPolicy()
    raise ValueError(f"unknown router {name!r}; known: {', '.join(ROUTERS)}")
