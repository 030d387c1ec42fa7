"""Discrete-event simulation of agent jobs on the real scheduler, timed by a cost model.

The REAL ``Scheduler`` (KV cache manager, prefix cache, pins, waiting order, preemption) and the REAL
estimator (``agent_engine.engine.job_hooks.JobHooks``, wired by the engine's own function,
``wire_scheduler``: it hears every job event from the scheduler's job table, first, as in the engine)
run on a ``FakeClock``; the scheduler's limits come from the run's ``EngineConfig``
(``SimConfig.scheduler_config``). The runner samples a fixed token id and the clock advances by the
cost model's time of the scheduled batch. Jobs follow the replay plans of
``agent_engine.workloads.replay.plan``: Poisson arrivals (``arrival_times``), per job a closed loop
over its turns planned by ``plan_job`` (prompt = previous prompt + previous output + fresh tokens up
to the trace's length, so prefix sharing is real; ``max_tokens`` with ``ignore_eos``; the tool wait
is the trace's ``tool_seconds``, never capped).

Events: job arrivals and tool returns (a heap keyed by time, ties in push order), and engine steps.
A request is added at its send time, after the step in flight ends (as a real engine loop would see
it); with nothing to run the clock jumps to the next event.

Invariants:
- Deterministic: the same jobs, cost model and ``SimConfig`` give the same result (no wall clock,
  no unseeded randomness; background estimator refits are off).
- Time only moves forward, by step times or jumps to events; a job's JCT is its last turn's finish
  time minus its first turn's send time, so a lone job's JCT is the sum of its step times and tool waits.
- Every job started sends exactly one ``is_last_step`` turn and then releases its pin (the DELETE).
- The simulation tells the estimator nothing itself: it adds turns, steps the scheduler and releases
  jobs; the job table publishes each event to the same listeners as in the engine.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence

from agent_engine.config import EngineConfig
from agent_engine.engine.job_hooks import PROFILE_LENGTHS, JobHooks, wire_scheduler
from agent_engine.sim.cost_model import CostModel, chunks_of
from agent_engine.sim.result import SimResult
from agent_engine.sim.sim_config import SimConfig
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
from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import (
    FakeClock,
    FakeRunner,
    Scheduler,
    SchedulerOutput,
    policy_class,
)
from scheduler.tier_copy import LOAD, PREFETCH

__all__ = ["build_scheduler", "build_tracker", "simulate"]

_RELOAD_LENGTHS = (*PROFILE_LENGTHS, 4096, 8192, 16384, 32768, 65536)


def build_tracker(engine: EngineConfig, cost: CostModel, clock: FakeClock, max_model_len: int,
                  tier: bool = False) -> JobHooks:
    """The engine's job hooks and estimator for ``engine``'s TTL policy; CONTINUUM's reload cost R(ctx)
    is fitted to the cost model's prefill times (where the engine would time its own prefills), and
    with a second ``tier`` its load-back cost to the cost model's host-link times. The simulator's turns
    carry their ``tool_name`` (a turn without one has no output text to read)."""
    est = Estimator(
        EstimatorConfig(ttl_policy=engine.ttl_policy, pin_threshold=engine.pin_threshold,
                        default_ttl=engine.pin_threshold, learned_model_path=engine.learned_model_path,
                        learned_refit_in_background=False),
        clock=clock,
    )
    if policy_class(engine.policy).uses_pins and engine.ttl_policy != "fixed":
        lengths = [n for n in _RELOAD_LENGTHS if n < max_model_len]
        seconds = [cost.prefill_time(n, engine.token_budget) for n in lengths]
        est.set_reload_cost(ReloadCostModel.fit(lengths, seconds))
        if tier:
            bs = engine.block_size
            est.set_tier_reload_cost(ReloadCostModel.fit(lengths, [cost.tier_load_time(-(-n // bs), bs) for n in lengths]))
    return JobHooks.of(engine, est, clock)


def build_scheduler(cfg: SimConfig, clock: FakeClock, tracker: JobHooks) -> Scheduler:
    """The real scheduler under ``cfg``'s limits, wired to ``tracker`` as the engine wires its own."""
    return wire_scheduler(cfg.scheduler_config(), clock, tracker)


class _Simulation:
    """The event loop of one run (see the module docstring); ``run`` returns its ``SimResult``."""

    def __init__(self, jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, record_steps: bool) -> None:
        self.cost, self.cfg, self.record_steps = cost, cfg, record_steps
        self.clock = FakeClock()
        self.tracker = build_tracker(cfg.engine, cost, self.clock, cfg.max_model_len, tier=cfg.memory == "tier")
        self.sched = build_scheduler(cfg, self.clock, self.tracker)
        self.runner = FakeRunner(lambda s: OUT_TOKEN)
        self.opts = cfg.replay_options()
        self.jobs = plan_jobs(jobs, self.opts)
        arrivals = arrival_times(len(self.jobs), self.opts)
        self.events = [(t, i, i) for i, t in enumerate(arrivals) if self.jobs[i].plan.turns]
        heapq.heapify(self.events)
        self.seq = len(self.jobs)
        self.live: dict[str, tuple[SimJob, SimRequest]] = {}
        self.res = SimResult(cfg.label)

    def run(self) -> SimResult:
        """Advance until every job has finished; then read the scheduler's counters."""
        while self.events or self.sched.has_unfinished_requests():
            now = self.clock.now()
            self._send_due(now)
            if not self.sched.has_unfinished_requests():
                self.clock.set(self.events[0][0])
                continue
            out = self.sched.schedule()
            if out.is_empty:
                if not self.events:
                    raise RuntimeError("simulation stuck: requests wait but nothing can be scheduled")
                self.clock.set(max(now, self.events[0][0]))
                continue
            self._step(out)
        self._read_counters()
        return self.res

    def _send_due(self, now: float) -> None:
        """Send the next turn of every job whose event (arrival or tool return) is due."""
        while self.events and self.events[0][0] <= now:
            t, _, i = heapq.heappop(self.events)
            self._send(self.jobs[i], t)

    def _send(self, job: SimJob, t: float) -> None:
        """Add the job's next turn to the scheduler: the previous context plus fresh tool tokens."""
        prompt, hashes = turn_context(job, t, self.opts)
        req = turn_request(job, prompt, hashes, t, self.cfg.engine.block_size)
        self.sched.add_request(req)
        self.live[req.request_id] = (job, req)

    def _step(self, out: SchedulerOutput) -> None:
        """Run one scheduled batch: advance the clock by its cost, then finish what it finished."""
        dt = compute = self.cost.step_time(chunks_of(out.scheduled))
        if out.kv_copies:  # a lookup's loads come before the step; prefetches overlap its compute
            bs = self.cfg.engine.block_size
            dt += self.cost.tier_load_time(sum(1 for c in out.kv_copies if c[0] == LOAD), bs)
            dt += max(0.0, self.cost.tier_load_time(sum(1 for c in out.kv_copies if c[0] == PREFETCH), bs) - compute)
        self.res.steps += 1
        self.res.busy_seconds += dt
        self.res.computed_tokens += out.total_num_scheduled_tokens
        if self.record_steps:
            self.res.step_times.append(dt)
        self.clock.advance(dt)
        for o in self.sched.update(out, self.runner.execute(out)):
            if o.finish_reason is not None:
                job, req = self.live.pop(o.request_id)
                self._finished(job, req, self.clock.now())

    def _finished(self, job: SimJob, req: SimRequest, now: float) -> None:
        """Account a finished turn; end the job (release its pin) or schedule its tool return."""
        wait = finish_turn(self.res, job, req, now)
        if wait is None:
            self.sched.release_job(job.plan.job_id)
        else:
            self.seq += 1
            heapq.heappush(self.events, (now + wait, self.seq, job.index))

    def _read_counters(self) -> None:
        st = self.sched.stats()
        self.res.preemptions = st.num_preemptions
        self.res.pins = st.pins.as_dict()
        self.res.tier = st.tier.as_dict() if st.tier is not None else {}
        self.res.sim_seconds = self.clock.now()


def simulate(
    jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, record_steps: bool = False
) -> SimResult:
    """Run ``jobs`` (the first ``cfg.max_jobs``) through the scheduler under ``cfg``; see the module doc.

    ``record_steps`` keeps every step's time in ``SimResult.step_times``.
    """
    wall0 = time.perf_counter()
    res = _Simulation(jobs, cost, cfg, record_steps).run()
    res.wall_seconds = time.perf_counter() - wall0
    return res
