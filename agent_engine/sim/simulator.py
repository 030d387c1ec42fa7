"""Discrete-event simulation of agent jobs on the real scheduler, timed by a cost model.

The REAL ``Scheduler`` (KV cache manager, prefix cache, pins, waiting order, preemption) and the REAL
estimator (through ``agent_engine.engine.job_hooks.JobHooks``, wired as the engine wires it) run on a
``FakeClock``; the scheduler's limits come from the run's ``EngineConfig``
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
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.engine.job_hooks import PROFILE_LENGTHS, JobHooks
from agent_engine.sim.config import SimConfig
from agent_engine.sim.cost_model import CostModel, chunks_of
from agent_engine.sim.result import SimResult
from agent_engine.workloads.replay.plan import JobPlan, arrival_times, job_header, plan_job
from agent_engine.workloads.traces.format import TraceJob
from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import FakeClock, FakeRunner, JobHints, Request, SamplingParams, Scheduler, SchedulerOutput

__all__ = ["build_scheduler", "build_tracker", "simulate"]

_FILL_TOKEN = 100  # the "fresh" tokens standing for tool output (the job header keeps chains unique)
_OUT_TOKEN = 7  # every sampled token
_RELOAD_LENGTHS = (*PROFILE_LENGTHS, 4096, 8192, 16384, 32768, 65536)


class _NoText:
    """Tokenizer stand-in: the simulator's turns carry ``tool_name``; a turn without one has no text."""

    @staticmethod
    def decode(ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return ""


class _SimRequest(Request):
    """A ``Request`` that starts from the previous turn's block hashes (its tokens are a prefix).

    The chained hashes are a pure function of the tokens, so inheriting them is exact; it spares
    re-hashing a whole growing context every turn.
    """

    def __init__(self, *args: Any, inherited_hashes: Sequence[int] = (), **kwargs: Any) -> None:
        self._inherited = inherited_hashes
        super().__init__(*args, **kwargs)

    def _extend_block_hashes(self) -> None:
        if self._inherited:
            self.block_hashes = list(self._inherited)
            self._inherited = ()
        super()._extend_block_hashes()


def build_tracker(engine: EngineConfig, cost: CostModel, clock: FakeClock, max_model_len: int) -> JobHooks:
    """The engine's job hooks and estimator for ``engine``'s TTL policy; CONTINUUM's reload cost R(ctx)
    is fitted to the cost model's prefill times (where the engine would time its own prefills)."""
    est = Estimator(
        EstimatorConfig(ttl_policy=engine.ttl_policy, pin_threshold=engine.pin_threshold,
                        default_ttl=engine.pin_threshold, learned_model_path=engine.learned_model_path,
                        learned_refit_in_background=False),
        clock=clock,
    )
    if engine.policy == "continuum" and engine.ttl_policy != "fixed":
        lengths = [n for n in _RELOAD_LENGTHS if n < max_model_len]
        seconds = [cost.prefill_time(n, engine.token_budget) for n in lengths]
        est.set_reload_cost(ReloadCostModel.fit(lengths, seconds))
    return JobHooks(est, _NoText(), clock)


def build_scheduler(cfg: SimConfig, clock: FakeClock, tracker: JobHooks) -> Scheduler:
    """The real scheduler under ``cfg``'s limits; CONTINUUM asks ``tracker`` for pin TTLs."""
    pin_ttl = tracker.pin_ttl if cfg.engine.policy == "continuum" else None
    return Scheduler(cfg.scheduler_config(), clock=clock, pin_ttl_fn=pin_ttl)


@dataclass
class _Job:
    """A job's progress: its plan, the next turn to send, its last finished request, its first send."""

    index: int
    plan: JobPlan
    next_turn: int = 0
    last_req: _SimRequest | None = None
    start_at: float = 0.0


class _Simulation:
    """The event loop of one run (see the module docstring); ``run`` returns its ``SimResult``."""

    def __init__(self, jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, record_steps: bool) -> None:
        self.cost, self.cfg, self.record_steps = cost, cfg, record_steps
        self.clock = FakeClock()
        self.tracker = build_tracker(cfg.engine, cost, self.clock, cfg.max_model_len)
        self.sched = build_scheduler(cfg, self.clock, self.tracker)
        self.runner = FakeRunner(lambda s: _OUT_TOKEN)
        self.opts = cfg.replay_options()
        picked = list(jobs)[: self.opts.max_jobs] if self.opts.max_jobs is not None else list(jobs)
        self.jobs = [_Job(i, plan_job(j, i, self.opts)) for i, j in enumerate(picked)]
        arrivals = arrival_times(len(self.jobs), self.opts)
        self.events = [(t, i, i) for i, t in enumerate(arrivals) if self.jobs[i].plan.turns]
        heapq.heapify(self.events)
        self.seq = len(self.jobs)
        self.live: dict[str, tuple[_Job, _SimRequest]] = {}
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

    def _send(self, job: _Job, t: float) -> None:
        """Add the job's next turn to the scheduler: the previous context plus fresh tool tokens."""
        tp = job.plan.turns[job.next_turn]
        prev = job.last_req
        if prev is None:
            prompt = (job_header(job.index, self.opts) + [_FILL_TOKEN] * tp.prompt_len)[: tp.prompt_len]
            hashes: Sequence[int] = ()
            job.start_at = t
        else:
            prompt = prev.all_token_ids + [_FILL_TOKEN] * (tp.prompt_len - prev.num_tokens)
            hashes = prev.block_hashes
        job_arrival = self.tracker.on_arrival(job.plan.job_id, t)
        req = _SimRequest(
            f"{job.plan.job_id}-{job.next_turn}", prompt,
            SamplingParams(temperature=0.0, max_tokens=tp.max_tokens, ignore_eos=True),
            block_size=self.cfg.engine.block_size, arrival_time=t, job_arrival_time=job_arrival,
            hints=JobHints.for_job(job.plan.job_id, is_last_step=tp.is_last_step, tool_name=tp.tool_name),
            inherited_hashes=hashes,
        )
        self.sched.add_request(req)
        self.live[req.request_id] = (job, req)

    def _step(self, out: SchedulerOutput) -> None:
        """Run one scheduled batch: advance the clock by its cost, then finish what it finished."""
        dt = self.cost.step_time(chunks_of(out.scheduled))
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

    def _finished(self, job: _Job, req: _SimRequest, now: float) -> None:
        """Account a finished turn; end the job (release its pin) or schedule its tool return."""
        self.tracker.on_finished(req, "")
        res = self.res
        res.prompt_tokens += req.num_prompt_tokens
        res.cached_tokens += max(0, req.num_cached_tokens)
        res.output_tokens += req.num_output_tokens
        if req.first_scheduled_time is not None:
            res.queue_delays.append(req.first_scheduled_time - req.arrival_time)
        tp = job.plan.turns[job.next_turn]
        job.next_turn += 1
        job.last_req = req
        if tp.is_last_step or job.next_turn >= len(job.plan.turns):
            self.sched.release_job(job.plan.job_id)
            self.tracker.on_job_released(job.plan.job_id)
            res.jcts.append(now - job.start_at)
            res.job_spans.append((job.start_at, now))
            job.last_req = None
        else:
            self.seq += 1
            heapq.heappush(self.events, (now + tp.sleep_s, self.seq, job.index))

    def _read_counters(self) -> None:
        st = self.sched.stats()
        self.res.preemptions = st.num_preemptions
        self.res.pins = dict(st.pins)
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
