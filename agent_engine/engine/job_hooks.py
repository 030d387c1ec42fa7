"""The engine's agent-job hooks: the estimator, as the first listener of the scheduler's job table.

The scheduler decides pins but holds only token ids; the estimator parses text and measures time.
``JobHooks`` connects them the one way a job's life flows: it is the listener the scheduler tells of
each job event first (``wire_scheduler``, the one function that wires the engine's and the
simulator's schedulers), and it writes what it decides onto the job's record, where the listeners
told after it read it:
- a turn arrives: the job's turn is counted and a pending tool call measured; the job's first arrival
  is on the record (``JobRecord.first_arrival``: CONTINUUM orders by it), and so is its estimate, whose
  ``expected_return`` the prefetcher asks;
- a turn ends: the turn is recorded with its tool (a client ``tool_name`` hint, else the tool call its
  output issued, read with the request's own ``output_reader``: the engine's tokenizer and the
  server's tool-call parser, ``DecodedTurn``), and, where the policy pins (``pins``), the pin TTL is
  chosen and written (``JobRecord.ttl``); a returning turn that found no pin feeds the queueing delay
  T and the reload-cost correction; a final turn ends the job;
- a turn is aborted: a final one ends the job; the client releases the job, or job inference abandons
  it: the job ends.
A job that ends writes its turns and JCT on the record (``JobRecord.completion``), for the listeners
after it (the server's metrics).

Invariants: each finished turn of a tracked job is recorded with the estimator exactly once (one event
per turn end); a request's observations go to its tenant's own estimator (``estimator_for``), so one
tenant's tool timings never move another tenant's TTLs; every estimator keeps its per-job state on the
scheduler's table (``keep_jobs_in``, before any job arrives); nothing calls these hooks but the table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent_engine.config import EngineConfig
from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import Clock, Request, Scheduler, SchedulerConfig, policy_class
from scheduler.job_record import JobCompletion, JobRecord
from scheduler.job_table import JobListener, JobTable
from scheduler.turn_output import NO_OUTPUT

logger = logging.getLogger(__name__)

__all__ = ["PROFILE_LENGTHS", "JobHooks", "wire_scheduler"]

# Context lengths timed at start-up to fit the reload cost R(ctx) of the paper's TTL rule.
PROFILE_LENGTHS = (64, 256, 512, 1024, 2048)

TraceSink = Callable[[dict], None]


class ProfilingRunner(Protocol):
    """The model runner as the hooks use it at start-up: its KV geometry and the timing probes."""

    num_kv_blocks: int
    block_size: int

    def profile_prefill(self, lengths: Sequence[int], repeats: int = 1, chunk: int = ...) -> list[float]: ...

    def profile_tier_load(self, lengths: Sequence[int]) -> list[float]: ...


def _profile_prefill(est: Estimator, runner: ProfilingRunner, lengths: list[int], chunk: int) -> None:
    """R(ctx): time fresh prefills of ``lengths`` tokens on the loaded model, in steps of ``chunk`` tokens
    (the engine's token budget: a re-prefill is split as the scheduler splits it)."""
    seconds = runner.profile_prefill(lengths, chunk=chunk)
    est.set_reload_cost(ReloadCostModel.fit(lengths, seconds))
    logger.info("reload cost profile: %s", dict(zip(lengths, [round(t, 4) for t in seconds], strict=True)))


def _profile_tier_load(est: Estimator, runner: ProfilingRunner, lengths: list[int]) -> None:
    """L(ctx): time loads of ``lengths`` tokens back from the second tier (nothing without one)."""
    seconds = runner.profile_tier_load(lengths)
    if seconds:
        est.set_tier_reload_cost(ReloadCostModel.fit(lengths, seconds))
        logger.info("second-tier load profile: %s", dict(zip(lengths, [round(t, 5) for t in seconds], strict=True)))


@dataclass
class JobHooks(JobListener):
    """The estimators (one per tenant) as the job table's first listener; see the module docstring."""

    estimator: Estimator
    clock: Clock
    pins: bool = False  # the policy pins finished turns: a TTL is chosen for each non-final one
    probably_final_ttl: float = 2.0
    jobs_finished: int = 0
    jct_sum: float = 0.0
    tenant_estimators: dict[str, Estimator] = field(default_factory=dict)  # keyed by tenant
    job_table: JobTable | None = None  # the scheduler's, once its estimators keep their jobs there

    @classmethod
    def of(cls, config: EngineConfig, estimator: Estimator, clock: Clock) -> JobHooks:
        """The hooks of an engine configured by ``config`` (the engine's and the simulator's)."""
        return cls(estimator, clock, pins=policy_class(config.policy).uses_pins,
                   probably_final_ttl=config.soft_pin_grace)

    @classmethod
    def build(cls, config: EngineConfig, clock: Clock, runner: ProfilingRunner) -> JobHooks:
        """An estimator configured from the engine config; profiles R(ctx) on the model if asked."""
        est = Estimator(
            EstimatorConfig(
                ttl_policy=config.ttl_policy,
                pin_threshold=config.pin_threshold,
                default_ttl=config.pin_threshold,
                learned_model_path=config.learned_model_path,
                reload_cost_profile=config.reload_cost_profile,
            ),
            clock=clock,
        )
        prices_misses = policy_class(config.policy).uses_pins and config.ttl_policy != "fixed"
        lengths = [n for n in PROFILE_LENGTHS if n < (runner.num_kv_blocks - 1) * runner.block_size]
        if prices_misses and len(lengths) >= 3:
            if config.reload_cost_profile is None and config.profile_reload_cost:
                _profile_prefill(est, runner, lengths, config.token_budget)
            _profile_tier_load(est, runner, lengths)  # cheap copies; a no-op without a tier
        return cls.of(config, est, clock)

    def keep_jobs_in(self, jobs: JobTable) -> None:
        """Keep every estimator's per-job state on ``jobs``' records (the scheduler's table), before any
        job arrives (``ValueError`` otherwise)."""
        if self.job_table is not None or self.tenant_estimators:
            raise ValueError("job hooks keep their jobs in one job table, chosen before any tenant's job arrives")
        self.estimator.keep_jobs_in(jobs)
        self.job_table = jobs

    # ---- the job table's events ----------------------------------------------------------------
    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        """Count the turn (measuring the pending tool call); the job's first arrival is on its record."""
        self.estimator_for(record.tenant).on_turn_arrival(record.job_id, request.arrival_time)

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        """Record the turn (with its pin TTL, written on the record, where the policy pins), its
        queueing delay and reload if it found no pin; a final turn ends the job."""
        est = self.estimator_for(request.tenant)
        turns = est.job_turns(record.job_id)
        recorded = self.pins and not request.is_last_step
        if recorded:
            record.ttl = self._pin_ttl(est, record.job_id, request, turns)
        if turns is None:
            return
        self._record_delays(est, request, turns)
        if request.is_last_step:
            self._end_job(record, request.finished_time or now)
        elif not recorded:
            out = NO_OUTPUT if request.tool_name is not None else request.read_output()
            tool = request.tool_name or est.parse_tool(out.text, out.tool_calls)
            est.record_turn_finished(record.job_id, tool, request.finished_time,
                                     context_tokens=request.num_tokens, turn_index=turns - 1)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        """An aborted final turn ends the job (it is over even if cut short); nothing else is recorded."""
        if request.is_last_step and self.estimator_for(request.tenant).job_turns(record.job_id) is not None:
            self._end_job(record, request.finished_time or now)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        """The client ended the job: it ends, as of ``now``."""
        self._end_job(record, now)

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        """Nobody will continue the job (job inference forgot it): it ends as of its last turn, ``now``."""
        self._end_job(record, now)

    # ---- the estimators ------------------------------------------------------------------------
    def _pin_ttl(self, est: Estimator, job_id: str, request: Request, turns: int | None) -> float:
        """TTL for a finished non-final turn (recorded with it): a client ``tool_name`` hint wins over
        reading its output. A turn of an inferred job whose output issued no tool call is probably
        final: it keeps at most ``probably_final_ttl`` seconds (its lease is cheap and soft anyway)."""
        out = NO_OUTPUT if request.tool_name is not None else request.read_output()
        probably_final = (request.tool_name is None and request.job_inferred
                          and est.parse_tool(out.text, out.tool_calls) is None)
        decision = est.on_turn_finished(
            job_id, text=out.text, tool_calls=out.tool_calls, tool_name=request.tool_name,
            context_tokens=request.num_tokens, turn_index=(turns or 1) - 1, ttl_hint=request.tool_ttl_hint,
            finish_time=request.finished_time,
        )
        return min(decision.ttl, self.probably_final_ttl) if probably_final else decision.ttl

    @staticmethod
    def _record_delays(est: Estimator, req: Request, turns: int) -> None:
        """A returning turn that found no pin: its queueing delay (T) and its reload time."""
        if turns > 1 and not req.pin_hit and req.first_scheduled_time is not None:
            est.record_unpinned_queue_delay(req.first_scheduled_time - req.arrival_time)
            if req.first_token_time is not None:
                recomputed = req.num_prompt_tokens - max(0, req.num_cached_tokens)
                est.record_reload(recomputed, req.first_token_time - req.first_scheduled_time)

    def estimator_for(self, tenant: str | None) -> Estimator:
        """The tenant's own estimator (its observations only; the shared prior is the configured
        learned model and the measured reload cost); ``None`` is the default tenant's."""
        if tenant is None:
            return self.estimator
        est = self.tenant_estimators.get(tenant)
        if est is None:
            est = Estimator(self.estimator.config, clock=self.clock, reload_cost=self.estimator.paper.reload_cost,
                            learned_model=self.estimator.learned.model)
            est.set_tier_reload_cost(self.estimator.paper.tier_reload_cost)
            if self.job_table is not None:
                est.keep_jobs_in(self.job_table)
            self.tenant_estimators[tenant] = est
        return est

    def _end_job(self, record: JobRecord, now: float) -> None:
        """End the job in the estimator tracking it (idempotent: an ended job is no one's); its turns and
        JCT go on the record (``completion``) for the listeners after this one."""
        ended = None
        for est in (self.estimator, *self.tenant_estimators.values()):
            ended = est.end_job(record.job_id)
            if ended is not None:
                break
        if ended is None:
            return
        turns, first_arrival = ended
        jct = max(0.0, now - first_arrival)
        self.jobs_finished += 1
        self.jct_sum += jct
        record.completion = JobCompletion(turns, jct)

    def stats(self) -> dict[str, object]:
        return {
            "jobs_active": sum(e.active_jobs() for e in (self.estimator, *self.tenant_estimators.values())),
            "estimator_tenants": len(self.tenant_estimators),
            "jobs_finished": self.jobs_finished,
            "jct_sum_seconds": self.jct_sum,
            "estimator": self.estimator.snapshot(),
        }


def wire_scheduler(config: SchedulerConfig, clock: Clock, hooks: JobHooks,
                   trace_sink: TraceSink | None = None) -> Scheduler:
    """The scheduler of an engine or a simulation, wired one way: its job table holds the estimators'
    per-job state, and ``hooks`` hear each job event first (then the policy, the tier, the prefetcher)."""
    jobs = JobTable()
    hooks.keep_jobs_in(jobs)
    return Scheduler(config, clock=clock, trace_sink=trace_sink, estimator=hooks, jobs=jobs)
