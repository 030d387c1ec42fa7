"""The engine's agent-job hooks: the bridge between the engine's requests and the estimator.

The scheduler decides pins but holds only token ids; this adapter owns the tokenizer view. It is
the pin-TTL callback the scheduler calls for a finished non-final CONTINUUM turn, and it feeds the
estimator what the engine measures: turn finish/arrival times (tool durations), queueing delays of
returning turns that found no pin (T), and finished jobs' turn counts (eta). The per-job state
(first arrival, turn count, the pending turn) lives in the estimator's one ``JobTracker``; this
adapter keeps only the finished-job totals and listeners.
Invariants: each finished non-final turn is recorded with the estimator exactly once; a request's
observations go to its tenant's own estimator (``estimator_for``), so one tenant's tool timings
never move another tenant's TTLs. A request whose output the server reads for tool calls registers
that reader (``read_output_with``): its calls name the turn's tool exactly as the API returned them
(a forced call's opening lives in the prompt, not the output); readers are dropped when their request
finishes, and at most ``MAX_OUTPUT_READERS`` are kept (a request rejected after rendering never finishes).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from estimator import Estimator, EstimatorConfig, ReloadCostModel
from scheduler import Clock, Request, RequestStatus, policy_class

logger = logging.getLogger(__name__)

# Context lengths timed at start-up to fit the reload cost R(ctx) of the paper's TTL rule.
PROFILE_LENGTHS = (64, 256, 512, 1024, 2048)

JobListener = Callable[[str, int, float], None]  # (job_id, turns, jct_seconds)
OutputReader = Callable[[str], list[dict[str, Any]]]  # decoded output -> OpenAI-style tool_calls
MAX_OUTPUT_READERS = 4096


def _profile_prefill(est: Estimator, runner: Any, lengths: list[int]) -> None:
    """R(ctx): time fresh prefills of ``lengths`` tokens on the loaded model."""
    seconds = runner.profile_prefill(lengths)
    est.set_reload_cost(ReloadCostModel.fit(lengths, seconds))
    logger.info("reload cost profile: %s", dict(zip(lengths, [round(t, 4) for t in seconds], strict=True)))


def _profile_tier_load(est: Estimator, runner: Any, lengths: list[int]) -> None:
    """L(ctx): time loads of ``lengths`` tokens back from the second tier (nothing without one)."""
    seconds = runner.profile_tier_load(lengths)
    if seconds:
        est.set_tier_reload_cost(ReloadCostModel.fit(lengths, seconds))
        logger.info("second-tier load profile: %s", dict(zip(lengths, [round(t, 5) for t in seconds], strict=True)))


@dataclass
class JobHooks:
    estimator: Estimator
    tokenizer: Any
    clock: Clock
    job_listeners: list[JobListener] = field(default_factory=list)
    probably_final_ttl: float = 2.0
    jobs_finished: int = 0
    jct_sum: float = 0.0
    _recorded: set[str] = field(default_factory=set)
    tenant_estimators: dict[str, Estimator] = field(default_factory=dict)
    output_readers: OrderedDict[str, OutputReader] = field(default_factory=OrderedDict)

    @classmethod
    def build(cls, config: Any, clock: Clock, tokenizer: Any, runner: Any) -> JobHooks:
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
            text = self.tokenizer.decode(req.output_token_ids, skip_special_tokens=True)
            calls = self._read_calls(self.output_readers.get(req.request_id), text)
            probably_final = req.job_inferred and est.parse_tool(text, calls) is None
        turns = (est.job_turns(req.job_id) if req.job_id else None) or 1
        decision = est.on_turn_finished(
            req.job_id, text=text, tool_calls=calls, tool_name=req.tool_name, context_tokens=req.num_tokens,
            turn_index=turns - 1, ttl_hint=req.tool_ttl_hint,
            finish_time=req.finished_time,
        )
        self._recorded.add(req.request_id)
        return min(decision.ttl, self.probably_final_ttl) if probably_final else decision.ttl

    def expected_return(self, job_id: str, tenant: str | None = None) -> float | None:
        """When ``job_id``'s pending turn is expected back (clock time; None if no turn is pending): the
        scheduler's prefetch from the second tier asks this."""
        return self.estimator_for(tenant).expected_return_time(job_id)

    # ---- engine hooks ------------------------------------------------------------------------
    def on_arrival(self, job_id: str, now: float, tenant: str | None = None) -> float:
        """A turn of ``job_id`` arrived; returns the job's first arrival (program-level FCFS key)."""
        return self.estimator_for(tenant).on_turn_arrival(job_id, now)

    def on_finished(self, req: Request, text: str) -> None:
        """A request ended (any reason). Records the turn, its queueing delay and a finished job."""
        rid = req.request_id
        already = rid in self._recorded
        self._recorded.discard(rid)
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
    def _read_calls(reader: OutputReader | None, text: str) -> list[dict[str, Any]] | None:
        if reader is None:
            return None
        try:
            return reader(text)
        except Exception:  # noqa: BLE001 - a reader must never take the engine down
            logger.exception("tool-call reader failed")
            return None

    def on_job_released(self, job_id: str) -> None:
        """The client ended the job (DELETE /v1/jobs/{id}); idempotent."""
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

    def stats(self) -> dict[str, Any]:
        return {
            "jobs_active": sum(e.active_jobs() for e in (self.estimator, *self.tenant_estimators.values())),
            "estimator_tenants": len(self.tenant_estimators),
            "jobs_finished": self.jobs_finished,
            "jct_sum_seconds": self.jct_sum,
            "estimator": self.estimator.snapshot(),
        }
