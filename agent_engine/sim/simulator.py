"""Discrete-event simulation of agent jobs on the real scheduler, timed by a cost model.

The REAL ``Scheduler`` (KV cache manager, prefix cache, pins, waiting order, preemption) and the REAL
estimator (through ``agent_engine.engine.jobs.JobTracker``, wired as in ``engine_factory``) run on a
``FakeClock``. The runner samples a fixed token id and the clock advances by the cost model's time of
the scheduled batch. Jobs follow ``agent_engine.workloads.replay.client``: Poisson arrivals (``arrival_times``),
per job a closed loop over its turns planned by ``plan_job`` (prompt = previous prompt + previous
output + fresh tokens up to the trace's length, so prefix sharing is real; ``max_tokens`` with
``ignore_eos``; the tool wait is the trace's ``tool_seconds``, never capped).

Events: job arrivals and tool returns (a heap keyed by time), and engine steps. A request is added
at its send time, after the step in flight ends (as a real engine loop would see it); with nothing to
run the clock jumps to the next event.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent_engine.engine.jobs import PROFILE_LENGTHS, JobTracker
from agent_engine.sim.cost_model import CostModel
from agent_engine.workloads.replay.client import ReplayOptions, arrival_times, plan_job
from agent_engine.workloads.traces.format import TraceJob
from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import FakeClock, FakeRunner, Request, SamplingParams, Scheduler, SchedulerConfig

__all__ = ["POLICIES", "SimConfig", "SimResult", "simulate", "parse_policy"]

POLICIES = ("fcfs", "continuum", "continuum-fixed", "continuum-learned")
_FILL_TOKEN = 100  # the "fresh" tokens standing for tool output (the job header keeps chains unique)
_OUT_TOKEN = 7  # every sampled token
_RELOAD_LENGTHS = (*PROFILE_LENGTHS, 4096, 8192, 16384, 32768, 65536)


def parse_policy(name: str) -> tuple[str, str]:
    """``(scheduler policy, ttl policy)`` of a simulator policy name (``continuum`` = paper TTLs)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known: {POLICIES}")
    if name == "fcfs":
        return "fcfs", "fixed"
    return "continuum", (name.split("-", 1)[1] if "-" in name else "paper")


@dataclass(frozen=True)
class SimConfig:
    """Engine limits and workload knobs of one simulated run (names follow ``EngineConfig``)."""

    policy: str
    num_blocks: int
    max_model_len: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    long_prefill_token_threshold: int = 0
    max_pinned_fraction: float = 0.5
    soft_pins: bool = True
    soft_pin_grace: float = 2.0
    pin_threshold: float = 2.0
    jps: float | None = None
    max_jobs: int | None = None
    max_turns: int | None = None
    token_scale: float = 1.0
    time_scale: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        parse_policy(self.policy)

    def replay_options(self) -> ReplayOptions:
        return ReplayOptions(
            jps=self.jps, max_jobs=self.max_jobs, max_turns=self.max_turns, token_scale=self.token_scale,
            time_scale=self.time_scale, seed=self.seed, max_model_len=self.max_model_len - 1, progress=False,
        )


@dataclass
class SimResult:
    """Per-job and per-turn outcomes plus engine counters of one run."""

    policy: str
    jcts: list[float] = field(default_factory=list)
    job_spans: list[tuple[float, float]] = field(default_factory=list)  # (first send, last finish)
    queue_delays: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    computed_tokens: int = 0
    steps: int = 0
    busy_seconds: float = 0.0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    step_times: list[float] = field(default_factory=list)  # only with ``record_steps``
    preemptions: int = 0
    pins: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The keys of ``bench jct``'s per-policy object, plus simulator counters."""
        j = np.asarray(self.jcts, float)
        span = (max(e for _, e in self.job_spans) - min(s for s, _ in self.job_spans)) if self.job_spans else 0.0

        def pct(q: float) -> float | None:
            return float(np.percentile(j, q)) if j.size else None

        decode = self.output_tokens - len(self.queue_delays)  # the last token of a turn is never computed
        return {
            "jobs": len(self.jcts),
            "mean_jct_s": float(j.mean()) if j.size else None,
            "p50_jct_s": pct(50), "p90_jct_s": pct(90), "p99_jct_s": pct(99),
            "jobs_per_min": 60.0 * len(self.jcts) / span if span > 0 else None,
            "mean_queue_s": float(np.mean(self.queue_delays)) if self.queue_delays else None,
            "prefix_hit_ratio": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None,
            "prefill_tokens": self.computed_tokens - decode,
            "preemptions": self.preemptions,
            "pins": self.pins,
            "steps": self.steps, "sim_seconds": self.sim_seconds, "busy_seconds": self.busy_seconds,
            "wall_seconds": self.wall_seconds,
        }


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


def build_tracker(cfg: SimConfig, cost: CostModel, clock: FakeClock) -> JobTracker:
    """An estimator set up like ``JobTracker.build``, with R(ctx) from the cost model's prefill times."""
    _, ttl_policy = parse_policy(cfg.policy)
    est = Estimator(
        EstimatorConfig(ttl_policy=ttl_policy, pin_threshold=cfg.pin_threshold, default_ttl=cfg.pin_threshold,
                        learned_refit_in_background=False),
        clock=clock,
    )
    if ttl_policy != "fixed":
        lengths = [n for n in _RELOAD_LENGTHS if n < cfg.max_model_len]
        est.set_reload_cost(ReloadCostModel.fit(lengths, [cost.prefill_time(n, cfg.max_num_batched_tokens)
                                                          for n in lengths]))
    return JobTracker(est, _NoText(), clock)


def simulate(jobs: Sequence[TraceJob], cost: CostModel, cfg: SimConfig, record_steps: bool = False) -> SimResult:
    """Run ``jobs`` (the first ``cfg.max_jobs``) through the scheduler under ``cfg``; see the module doc."""
    wall0 = time.perf_counter()
    policy, _ = parse_policy(cfg.policy)
    clock = FakeClock()
    tracker = build_tracker(cfg, cost, clock)
    sched = Scheduler(
        SchedulerConfig(
            num_blocks=cfg.num_blocks, block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=cfg.max_model_len,
            long_prefill_token_threshold=cfg.long_prefill_token_threshold, policy=policy,
            max_pinned_fraction=cfg.max_pinned_fraction, soft_pins=cfg.soft_pins,
            soft_pin_grace=cfg.soft_pin_grace,
        ),
        clock=clock,
        pin_ttl_fn=tracker.pin_ttl if policy == "continuum" else None,
    )
    runner = FakeRunner(lambda s: _OUT_TOKEN)
    opts = cfg.replay_options()
    jobs = list(jobs)[: opts.max_jobs] if opts.max_jobs is not None else list(jobs)
    plans = [plan_job(j, i, opts) for i, j in enumerate(jobs)]
    arrivals = arrival_times(len(plans), opts)
    base = opts.vocab_size - opts.min_token_id

    res = SimResult(cfg.policy)
    next_turn = [0] * len(plans)
    last_req: list[_SimRequest | None] = [None] * len(plans)
    start_at = [0.0] * len(plans)
    live: dict[str, tuple[int, _SimRequest]] = {}
    events: list[tuple[float, int, int]] = [(t, i, i) for i, t in enumerate(arrivals) if plans[i].turns]
    heapq.heapify(events)
    seq = len(plans)
    step_time = cost.step_time

    def send(i: int, t: float) -> None:
        plan, k = plans[i], next_turn[i]
        tp = plan.turns[k]
        prev = last_req[i]
        if prev is None:
            header = [opts.min_token_id + (i // base**p) % base for p in range(2)]
            prompt = (header + [_FILL_TOKEN] * tp.prompt_len)[: tp.prompt_len]
            hashes: Sequence[int] = ()
            start_at[i] = t
        else:
            prompt = prev.all_token_ids + [_FILL_TOKEN] * (tp.prompt_len - prev.num_tokens)
            hashes = prev.block_hashes
        job_arrival = tracker.on_arrival(plan.job_id, t)
        req = _SimRequest(
            f"{plan.job_id}-{k}", prompt,
            SamplingParams(temperature=0.0, max_tokens=tp.max_tokens, ignore_eos=True),
            block_size=cfg.block_size, arrival_time=t, job_id=plan.job_id, is_last_step=tp.is_last_step,
            job_arrival_time=job_arrival, tool_name=tp.tool_name, inherited_hashes=hashes,
        )
        sched.add_request(req)
        live[req.request_id] = (i, req)

    def finished(i: int, req: _SimRequest, now: float) -> None:
        nonlocal seq
        tracker.on_finished(req, "")
        res.prompt_tokens += req.num_prompt_tokens
        res.cached_tokens += max(0, req.num_cached_tokens)
        res.output_tokens += req.num_output_tokens
        if req.first_scheduled_time is not None:
            res.queue_delays.append(req.first_scheduled_time - req.arrival_time)
        plan = plans[i]
        tp = plan.turns[next_turn[i]]
        next_turn[i] += 1
        last_req[i] = req
        if tp.is_last_step or next_turn[i] >= len(plan.turns):
            sched.release_job(plan.job_id)
            tracker.on_job_released(plan.job_id)
            res.jcts.append(now - start_at[i])
            res.job_spans.append((start_at[i], now))
            last_req[i] = None
        else:
            seq += 1
            heapq.heappush(events, (now + tp.sleep_s, seq, i))

    while events or sched.has_unfinished_requests():
        now = clock.now()
        while events and events[0][0] <= now:
            t, _, i = heapq.heappop(events)
            send(i, t)
        if not sched.has_unfinished_requests():
            clock.set(events[0][0])
            continue
        out = sched.schedule()
        if out.is_empty:
            if not events:
                raise RuntimeError("simulation stuck: requests wait but nothing can be scheduled")
            clock.set(max(now, events[0][0]))
            continue
        dt = step_time([(len(s.token_ids), s.num_computed_tokens, s.do_sample) for s in out.scheduled])
        res.steps += 1
        res.busy_seconds += dt
        res.computed_tokens += out.total_num_scheduled_tokens
        if record_steps:
            res.step_times.append(dt)
        clock.advance(dt)
        for o in sched.update(out, runner.execute(out)):
            if o.finish_reason is not None:
                i, req = live.pop(o.request_id)
                finished(i, req, clock.now())

    st = sched.stats()
    res.preemptions = st.num_preemptions
    res.pins = dict(st.pins)
    res.sim_seconds = clock.now()
    res.wall_seconds = time.perf_counter() - wall0
    return res
