"""N simulated engine replicas behind one router: the cluster's routing policies at GPU scale.

Each replica is the single-engine simulation's engine (``simulator``): the REAL scheduler and
estimator on its own fake clock, step times from the cost model, one GPU each. A job's turn is
routed when it is sent, by the same pure policy the Ray Serve routers run
(``agent_engine.routing.make_policy``: affinity, pow2, rr), from each replica's exact state at that
moment: its queue (waiting + running + requests sent during its step in flight), the jobs holding a
lease there, the jobs with a request there, its free blocks. The prompt's prefix chain is every
``prefix_every``-th block hash of the previous turn's context.

Events (a heap keyed by time, ties in push order): job sends (arrival or tool return) and the end of
a replica's step. A request routed to a busy replica joins it when its step ends (as a real engine
loop would see it: its estimator hears the turn's arrival then, from the replica's job table); an idle replica catches up to the event's time at every event (its leases
expire, requests that waited for room are admitted).

Invariants:
- Deterministic for the same jobs, cost model, config, replica count and policy (pow2 is seeded).
- Every replica's clock only moves forward; a job's JCT is its last turn's finish minus its first send.
- A finished job is released on every replica (the ingress broadcasts ``DELETE /v1/jobs``).
- ``replicas == 1`` gives the single-engine simulation's JCTs (one replica, nothing to route).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_engine.json_types import JsonObject
from agent_engine.routing import ReplicaView, RouteKey, make_policy, next_turn_reuse
from agent_engine.routing.policies import DEFAULT_MAX_IMBALANCE, RoutingPolicy
from agent_engine.sim.cost_model import CostModel, chunks_of
from agent_engine.sim.result import SimResult
from agent_engine.sim.sim_config import SimConfig
from agent_engine.sim.simulator import build_scheduler, build_tracker
from agent_engine.sim.turns import (
    OUT_TOKEN,
    SimJob,
    SimRequest,
    finish_turn,
    plan_jobs,
    turn_context,
    turn_request,
)
from agent_engine.workloads.replay.plan import arrival_times
from agent_engine.workloads.traces.format import TraceJob
from scheduler import FakeClock, FakeRunner, SchedulerOutput

__all__ = ["ClusterSimResult", "simulate_cluster"]

DEFAULT_PREFIX_EVERY = 16  # one chain entry per 16 blocks (256 tokens at block size 16)
_SEND, _DONE = 0, 1


@dataclass
class ClusterSimResult(SimResult):
    """A ``SimResult`` over all replicas plus the routing outcome."""

    router: str = ""
    replicas: int = 1
    next_turn_reuse: float | None = None  # over every job's turns (``SimJob.turns``), set when the run ends
    routing: dict[str, int] = field(default_factory=dict)
    replica_turns: list[int] = field(default_factory=list)

    def summary(self) -> JsonObject:
        """``SimResult.summary`` plus ``next_turn_reuse``, the router's counters and turns per replica."""
        return {**super().summary(), "router": self.router, "replicas": self.replicas,
                "next_turn_reuse": self.next_turn_reuse, "routing": self.routing,
                "replica_turns": self.replica_turns}


class _Replica:
    """One simulated engine: its clock, scheduler and estimator, its inbox and its step in flight."""

    def __init__(self, index: int, cfg: SimConfig, cost: CostModel) -> None:
        self.index, self.rid = index, f"replica-{index}"
        self.clock = FakeClock()
        self.tracker = build_tracker(cfg.engine, cost, self.clock, cfg.max_model_len, tier=cfg.memory == "tier")
        self.sched = build_scheduler(cfg, self.clock, self.tracker)
        self.inbox: list[SimRequest] = []
        self.step: SchedulerOutput | None = None
        self.turns = 0

    def view(self, now: float) -> ReplicaView:
        s = self.sched
        active = {r.job_id for r in (*s.requests.values(), *self.inbox) if r.job_id}
        return ReplicaView(self.rid, len(s.requests) + len(self.inbox),
                           frozenset(s.held_jobs()), frozenset(active),
                           s.kv.pool.num_free_blocks, stats_at=now)


class _ClusterSimulation:
    """The event loop of one cluster run (see the module docstring)."""

    def __init__(self, jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, replicas: int,
                 policy: RoutingPolicy, prefix_every: int) -> None:
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.cost, self.cfg, self.policy, self.prefix_every = cost, cfg, policy, max(1, prefix_every)
        self.replicas = [_Replica(i, cfg, cost) for i in range(replicas)]
        self.by_id = {r.rid: r for r in self.replicas}
        self.runner = FakeRunner(lambda s: OUT_TOKEN)
        self.opts = cfg.replay_options()
        self.jobs = plan_jobs(jobs, self.opts)
        self.events: list[tuple[float, int, int, int]] = []
        self.seq = 0
        for i, t in enumerate(arrival_times(len(self.jobs), self.opts)):
            if self.jobs[i].plan.turns:
                self._push(t, _SEND, i)
        self.live: dict[str, tuple[SimJob, SimRequest, _Replica]] = {}
        self.res = ClusterSimResult(cfg.label, router=policy.name, replicas=replicas)

    def _push(self, t: float, kind: int, index: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, index))

    def run(self) -> ClusterSimResult:
        """Process events until none is left; every job must have finished."""
        while self.events:
            t, _, kind, i = heapq.heappop(self.events)
            if kind == _DONE:
                self._step_done(self.replicas[i], t)
            for r in self.replicas:
                if r.step is None:
                    self._start(r, t)
            if kind == _SEND:
                self._send(self.jobs[i], t)
        if any(r.sched.has_unfinished_requests() or r.inbox for r in self.replicas):
            raise RuntimeError("simulation stuck: requests wait but nothing can be scheduled")
        self._read_counters()
        return self.res

    def _start(self, r: _Replica, t: float) -> None:
        """An idle replica at time ``t``: take its inbox and start its next step, if it has one."""
        if r.clock.now() < t:
            r.clock.set(t)
        for req in r.inbox:
            r.sched.add_request(req)
        r.inbox.clear()
        out = r.sched.schedule()
        if out.is_empty:
            return
        dt = self.cost.step_time(chunks_of(out.scheduled))
        self.res.steps += 1
        self.res.busy_seconds += dt
        self.res.computed_tokens += out.total_num_scheduled_tokens
        r.step = out
        self._push(t + dt, _DONE, r.index)

    def _step_done(self, r: _Replica, t: float) -> None:
        out, r.step = r.step, None
        assert out is not None
        r.clock.set(t)
        for o in r.sched.update(out, self.runner.execute(out)):
            if o.finish_reason is not None:
                job, req, _ = self.live.pop(o.request_id)
                self._finished(job, req, t)

    def _send(self, job: SimJob, t: float) -> None:
        """Route the job's next turn and hand it to the chosen replica (now if idle, else at its step end)."""
        prompt, hashes = turn_context(job, t, self.opts)
        key = RouteKey(job.plan.job_id, tuple(hashes[self.prefix_every - 1::self.prefix_every]))
        r = self.by_id[self.policy.rank(key, [x.view(t) for x in self.replicas], t)[0]]
        r.turns += 1
        req = turn_request(job, prompt, hashes, t, self.cfg.engine.block_size)
        self.live[req.request_id] = (job, req, r)
        r.inbox.append(req)
        if r.step is None:
            self._start(r, t)

    def _finished(self, job: SimJob, req: SimRequest, now: float) -> None:
        """Account a finished turn; end the job (release it everywhere) or schedule its tool return."""
        job.turns.append((req.num_prompt_tokens, req.num_output_tokens, max(0, req.num_cached_tokens)))
        wait = finish_turn(self.res, job, req, now)
        if wait is None:
            for x in self.replicas:
                x.sched.release_job(job.plan.job_id)
        else:
            self._push(now + wait, _SEND, job.index)

    def _read_counters(self) -> None:
        res = self.res
        res.next_turn_reuse = next_turn_reuse(job.turns for job in self.jobs)
        for r in self.replicas:
            st = r.sched.stats()
            res.preemptions += st.num_preemptions
            for k, v in st.pins.as_dict().items():
                res.pins[k] = res.pins.get(k, 0) + v
            res.sim_seconds = max(res.sim_seconds, r.clock.now())
        res.routing = self.policy.counters.as_dict()
        res.replica_turns = [r.turns for r in self.replicas]


def simulate_cluster(jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, replicas: int,
                     router: str, *, max_imbalance: int = DEFAULT_MAX_IMBALANCE, seed: int = 0,
                     prefix_every: int = DEFAULT_PREFIX_EVERY) -> ClusterSimResult:
    """Run ``jobs`` on ``replicas`` simulated engines (each configured by ``cfg``) routed by ``router``
    (one of ``agent_engine.routing.ROUTERS``); see the module docstring."""
    wall0 = time.perf_counter()
    policy = make_policy(router, max_imbalance=max_imbalance, seed=seed)
    res = _ClusterSimulation(jobs, cost, cfg, replicas, policy, prefix_every).run()
    res.wall_seconds = time.perf_counter() - wall0
    return res
