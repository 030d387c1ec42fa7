"""The engine's agent-job hooks: the bridge between the engine's requests and the estimator.

The scheduler decides pins but holds only token ids; this adapter owns the tokenizer view. It is
the pin-TTL callback the scheduler calls for a finished non-final CONTINUUM turn, and it feeds the
estimator what the engine measures: turn finish/arrival times (tool durations), queueing delays of
returning turns that found no pin (T), and finished jobs' turn counts (eta). It is a listener of the
scheduler's job table (``attach``): a job's arrival and release reach it from there, once each. The
per-job state (first arrival, turn count, the pending turn) is on the job's record in that table
(``JobRecord.estimate``, written by the estimators); this adapter keeps only the finished-job totals
and listeners, and the per-tenant estimators (keyed by tenant, not job).
Invariants: each finished non-final turn is recorded with the estimator exactly once (the request's
``turn_recorded`` says pin_ttl did it); a request's observations go to its tenant's own estimator
(``estimator_for``), so one tenant's tool timings never move another tenant's TTLs. A request whose output the server reads for tool calls registers
that reader (``read_output_with``): its calls name the turn's tool exactly as the API returned them
(a forced call's opening lives in the prompt, not the output); readers are dropped when their request
finishes, and at most ``MAX_OUTPUT_READERS`` are kept (a request rejected after rendering never finishes).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent_engine.config import EngineConfig
from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import Clock, Request, RequestStatus, policy_class
from scheduler.job_record import JobRecord
from scheduler.job_table import JobListener, JobTable

logger = logging.getLogger(__name__)

# Context lengths timed at start-up to fit the reload cost R(ctx) of the paper's TTL rule.
PROFILE_LENGTHS = (64, 256, 512, 1024, 2048)

JobEndedFn = Callable[[str, int, float], None]  # (job_id, turns, jct_seconds)
ToolCalls = list[dict[str, object]]  # OpenAI-style tool_calls
OutputReader = Callable[[str], ToolCalls]  # decoded output -> its tool calls
MAX_OUTPUT_READERS = 4096


class TextDecoder(Protocol):
    """The tokenizer as the hooks use it: token ids back to text."""

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


class ProfilingRunner(Protocol):
    """The model runner as the hooks use it at start-up: its KV geometry and the timing probes."""

    num_kv_blocks: int
    block_size: int

    def profile_prefill(self, lengths: Sequence[int]) -> list[float]: ...

    def profile_tier_load(self, lengths: Sequence[int]) -> list[float]: ...


def _profile_prefill(est: Estimator, runner: ProfilingRunner, lengths: list[int]) -> None:
    """R(ctx): time fresh prefills of ``lengths`` tokens on the loaded model."""
    seconds = runner.profile_prefill(lengths)
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
    estimator: Estimator
    tokenizer: TextDecoder | None
    clock: Clock
    job_listeners: list[JobEndedFn] = field(default_factory=list)
    probably_final_ttl: float = 2.0
    jobs_finished: int = 0
    jct_sum: float = 0.0
    tenant_estimators: dict[str, Estimator] = field(default_factory=dict)  # keyed by tenant
    output_readers: OrderedDict[str, OutputReader] = field(default_factory=OrderedDict)  # by request id
    job_table: JobTable | None = None  # the scheduler's, once ``attach``ed

    @classmethod
    def build(cls, config: EngineConfig, clock: Clock, tokenizer: TextDecoder | None,
              runner: ProfilingRunner) -> JobHooks:
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
                _profile_prefill(est, runner, lengths)
            _profile_tier_load(est, runner, lengths)  # cheap copies; a no-op without a tier
        return cls(est, tokenizer, clock, probably_final_ttl=config.soft_pin_grace)

    # ---- scheduler callback ------------------------------------------------------------------
    def pin_ttl(self, req: Request) -> float:
        """TTL for a finished non-final turn: a client ``tool_name`` hint wins over parsing its text.

        A turn of an inferred job whose output issued no tool call is probably final: it keeps at
        most ``probably_final_ttl`` seconds (its lease is cheap and soft anyway)."""
        est = self.estimator_for(req.tenant)
        text = None
        calls = None
        probably_final = False
        if req.tool_name is None:
            text = self._decode(req.output_token_ids)
            calls = self._read_calls(self.output_readers.get(req.request_id), text)
            probably_final = req.job_inferred and est.parse_tool(text, calls) is None
        turns = (est.job_turns(req.job_id) if req.job_id else None) or 1
        decision = est.on_turn_finished(
            req.job_id, text=text, tool_calls=calls, tool_name=req.tool_name, context_tokens=req.num_tokens,
            turn_index=turns - 1, ttl_hint=req.tool_ttl_hint,
            finish_time=req.finished_time,
        )
        req.turn_recorded = True
        return min(decision.ttl, self.probably_final_ttl) if probably_final else decision.ttl

    def _decode(self, token_ids: Sequence[int]) -> str:
        if self.tokenizer is None:
            raise ValueError("reading a turn's tool from its text needs a tokenizer")
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def expected_return(self, job_id: str, tenant: str | None = None) -> float | None:
        """When ``job_id``'s pending turn is expected back (clock time; None if no turn is pending): the
        scheduler's prefetch from the second tier asks this."""
        return self.estimator_for(tenant).expected_return_time(job_id)

    # ---- the scheduler's job table -----------------------------------------------------------
    def attach(self, jobs: JobTable) -> None:
        """Listen to the scheduler's job table and keep every estimator's per-job state on its records
        (before any job arrives: ``ValueError`` otherwise)."""
        if self.job_table is not None or self.tenant_estimators:
            raise ValueError("job hooks attach to one job table, before any tenant's job arrives")
        self.estimator.keep_jobs_in(jobs)
        self.job_table = jobs
        jobs.listen(self)

    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job was added to the scheduler: stamp its program-order key (the job's first arrival)."""
        request.job_arrival_time = self.on_arrival(record.job_id, request.arrival_time, record.tenant)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        """The client ended the job: it ends in its tenant's estimator, as of ``now``."""
        self._end_job(record.job_id, now)

    # ---- engine hooks ------------------------------------------------------------------------
    def on_arrival(self, job_id: str, now: float, tenant: str | None = None) -> float:
        """A turn of ``job_id`` arrived; returns the job's first arrival (program-level FCFS key). Told by
        the job table once attached; a caller without a table (the simulator) calls it itself."""
        return self.estimator_for(tenant).on_turn_arrival(job_id, now)

    def on_finished(self, req: Request, text: str) -> None:
        """A request ended (any reason). Records the turn, its queueing delay and a finished job."""
        rid = req.request_id
        already = req.turn_recorded
        reader = self.output_readers.pop(rid, None)
        if req.job_id is None:
            return
        est = self.estimator_for(req.tenant)
        turns = est.job_turns(req.job_id)
        if turns is None:
            return
        if req.status is RequestStatus.FINISHED_ABORTED:
            if req.is_last_step:  # the job is over even if its last turn was cut short
                self._end_job(req.job_id, req.finished_time or self.clock.now())
            return
        if turns > 1 and not req.pin_hit and req.first_scheduled_time is not None:
            est.record_unpinned_queue_delay(req.first_scheduled_time - req.arrival_time)
            if req.first_token_time is not None:
                recomputed = req.num_prompt_tokens - max(0, req.num_cached_tokens)
                est.record_reload(recomputed, req.first_token_time - req.first_scheduled_time)
        if req.is_last_step:
            self._end_job(req.job_id, req.finished_time or self.clock.now())
        elif not already:
            tool = req.tool_name or est.parse_tool(text, self._read_calls(reader, text))
            est.record_turn_finished(req.job_id, tool, req.finished_time,
                                                context_tokens=req.num_tokens, turn_index=turns - 1)

    def read_output_with(self, request_id: str, reader: OutputReader) -> None:
        """Name ``request_id``'s tool from ``reader(decoded output)`` (the server's tool-call parser)."""
        self.output_readers[request_id] = reader
        self.output_readers.move_to_end(request_id)
        while len(self.output_readers) > MAX_OUTPUT_READERS:
            self.output_readers.popitem(last=False)

    @staticmethod
    def _read_calls(reader: OutputReader | None, text: str) -> ToolCalls | None:
        if reader is None:
            return None
        try:
            return reader(text)
        except Exception:  # noqa: BLE001 - a reader must never take the engine down
            logger.exception("tool-call reader failed")
            return None

    def on_job_released(self, job_id: str) -> None:
        """The client ended the job (DELETE /v1/jobs/{id}); idempotent. Once attached the job table tells
        ``on_job_release``; a caller without a table (the simulator) calls this itself."""
        self._end_job(job_id, self.clock.now())

    def end_job(self, job_id: str, at: float) -> None:
        """End a job nobody will continue (an inferred job the index forgot) as of ``at``; idempotent."""
        self._end_job(job_id, at)

    def knows_job(self, job_id: str) -> bool:
        """Whether some tenant's estimator tracks ``job_id`` (it has turns and has not ended)."""
        return any(e.job_turns(job_id) is not None for e in (self.estimator, *self.tenant_estimators.values()))

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

    def _end_job(self, job_id: str, now: float) -> None:
        ended = None
        for est in (self.estimator, *self.tenant_estimators.values()):
            ended = est.end_job(job_id)
            if ended is not None:
                break
        if ended is None:
            return
        turns, first_arrival = ended
        jct = max(0.0, now - first_arrival)
        self.jobs_finished += 1
        self.jct_sum += jct
        for fn in self.job_listeners:
            fn(job_id, turns, jct)

    def stats(self) -> dict[str, object]:
        return {
            "jobs_active": sum(e.active_jobs() for e in (self.estimator, *self.tenant_estimators.values())),
            "estimator_tenants": len(self.tenant_estimators),
            "jobs_finished": self.jobs_finished,
            "jct_sum_seconds": self.jct_sum,
            "estimator": self.estimator.snapshot(),
        }
