"""LLMEngine: tokenizer + scheduler + model runner + detokenizer, advanced one ``step()`` at a time.

``step()`` is ``scheduler.schedule()`` -> ``runner.execute()`` -> ``scheduler.update()``, then
detokenization and stop strings. Not thread-safe: one thread owns an engine (the server's loop).
Invariants: a request's blocks are released exactly once, whether it finishes, is aborted, or its
batch fails in the model step. The engine tells nobody of a job's events itself: its scheduler is
wired by ``job_hooks.wire_scheduler`` (as the simulator's is), so the estimator hears them from the
job table, first; what a listener needs of a turn travels on its ``Request`` (``output_reader``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from agent_engine.config import EngineConfig
from agent_engine.engine.detokenizer import IncrementalDetokenizer
from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.engine_stats import EngineStats, JobStats, RoutingStats, TierStoreStats
from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.job_hooks import wire_scheduler
from agent_engine.engine.job_inference import JobInference
from agent_engine.engine.outputs import RequestOutput
from agent_engine.engine.prompts import PromptType, longest_token_bytes, tokenize_prompt
from agent_engine.engine.request_state import RequestState
from agent_engine.engine.structured_outputs import StructuredOutputManager
from agent_engine.engine.turn_reader import DecodedTurn
from scheduler import (
    NO_HINTS,
    Clock,
    JobHints,
    MonotonicClock,
    Request,
    RequestStatus,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
    StructuredSpec,
)
from scheduler.job_table import JobListener
from scheduler.step_io import NO_LOGPROBS, logprobs_of

logger = logging.getLogger(__name__)


class LLMEngine:
    """The offline/online engine core. See ``add_request``, ``step``, ``abort``, ``release_job``."""

    def __init__(self, config: EngineConfig, clock: Clock | None = None) -> None:
        from agent_engine.engine.factory import build_engine_parts

        self.clock = clock or MonotonicClock()
        parts = build_engine_parts(config, self.clock)
        self.config = parts.config
        self.loaded = parts.loaded
        self.tokenizer = parts.loaded.tokenizer
        self.model_name = config.served_model_name or parts.loaded.name
        self.vocab_size = parts.loaded.vocab_size
        self.eos_token_ids = list(parts.loaded.eos_token_ids)
        self.runner = parts.runner
        self.sched_config: SchedulerConfig = parts.sched_config
        self.max_model_len = parts.sched_config.max_model_len
        self.job_hooks = parts.job_hooks
        self.scheduler: Scheduler = wire_scheduler(parts.sched_config, self.clock, self.job_hooks, parts.trace_sink)
        self._close_trace: Callable[[], None] | None = parts.close_trace
        self._states: dict[str, RequestState] = {}
        self.job_inference = (JobInference(parts.sched_config.block_size, self.scheduler.jobs, tokenizer=self.tokenizer)
                              if self.scheduler.policy.uses_pins and config.infer_jobs else None)
        self.num_failed_steps = 0
        self.step_listeners: list[Callable[[dict[str, float]], None]] = []
        self.structured = StructuredOutputManager(self.tokenizer, self.vocab_size, self.eos_token_ids)

    @classmethod
    def from_kwargs(cls, **kwargs: object) -> LLMEngine:
        return cls(EngineConfig.from_kwargs(**kwargs))

    # ---- intake ------------------------------------------------------------------------------
    def tokenize_prompt(self, prompt: PromptType) -> tuple[str | None, list[int]]:
        """Turn a prompt (text, token ids, or ``{"prompt_token_ids": [...]}``) into ids; ValueError if bad
        (a text too long for ``max_model_len`` is refused before it is tokenized)."""
        return tokenize_prompt(self.tokenizer, self.vocab_size, prompt, self.max_model_len, self.max_token_bytes)

    @functools.cached_property
    def max_token_bytes(self) -> int:
        """The longest token's UTF-8 bytes (measured once, on first use)."""
        return longest_token_bytes(self.tokenizer, self.vocab_size)

    def make_request(self, request_id: str, prompt: PromptType, params: SamplingParams | None = None,
                     hints: JobHints = NO_HINTS, *, arrival_time: float | None = None) -> EngineRequest:
        """The engine's message for ``prompt`` (tokenized here; ValueError if bad), for callers without a
        server: ``engine.add_request(engine.make_request(...))``. ``hints`` as the engine keys them."""
        text, ids = self.tokenize_prompt(prompt)
        return EngineRequest(request_id, tuple(ids), text, params or SamplingParams(), hints,
                             arrival_time=arrival_time)

    def add_request(self, request: EngineRequest) -> Request:
        """Queue a request. Raises ValueError for bad input (nothing is queued then). A request without
        a job may get an inferred one (``job_inference``); its output reports where its job came from.
        Without ``request.grammar``, its output constraint is compiled here."""
        request_id, ids, params = request.request_id, request.prompt_token_ids, request.params
        if request_id in self._states:
            raise ValueError(f"duplicate request id {request_id!r}")
        if len(ids) + params.max_tokens > self.max_model_len:
            raise ValueError(
                f"prompt ({len(ids)} tokens) plus max_tokens ({params.max_tokens}) exceeds "
                f"max_model_len ({self.max_model_len})"
            )
        self.structured.add(request_id, params, request.grammar)  # compiles params.structured if needed; ValueError if bad
        now = self.clock.now() if request.arrival_time is None else request.arrival_time
        req = Request(request_id, ids, self._with_extra_eos(params), block_size=self.sched_config.block_size,
                      arrival_time=now, eos_token_id=self.eos_token_ids[0] if self.eos_token_ids else None,
                      hints=request.hints, output_reader=DecodedTurn(self.tokenizer, request.tool_reader))
        if req.job_id is None and self.job_inference is not None:
            self.job_inference.assign(req)  # which job it is; the job table publishes its arrival
        detok = IncrementalDetokenizer(self.tokenizer, ids, skip_special_tokens=True)
        try:
            self.scheduler.add_request(req)
        except BaseException:
            self.structured.remove(request_id)
            raise
        self._states[request_id] = RequestState(req, request.prompt_text, detok, params.stop,
                                                params.include_stop_str_in_output)
        return req

    def compile_grammar(self, spec: StructuredSpec, limits: GrammarLimits, cancel: threading.Event,
                        fast: bool = False) -> ReadyGrammar:
        """``spec`` compiled within ``limits`` (thread-safe; for a pool thread, never the step loop), tried
        on the fast lane with ``fast``. Raises ``GrammarRefused`` (a ValueError), ``GrammarCancelled``
        once ``cancel`` is set, ``FastLaneExceeded`` or ``GrammarWorkerDied`` (``grammar_workers``)."""
        return self.structured.compile_checked(spec, limits, cancel, fast)

    def cached_grammar(self, spec: StructuredSpec) -> ReadyGrammar | None:
        """The compiled grammar of ``spec`` if it is cached, else None (thread-safe, cheap)."""
        return self.structured.cached(spec)

    def _with_extra_eos(self, params: SamplingParams) -> SamplingParams:
        """``params`` as the scheduler sees them: the model's further eos tokens are stop tokens."""
        extra_eos = tuple(t for t in self.eos_token_ids[1:] if t not in params.stop_token_ids)
        if extra_eos and not params.ignore_eos:
            return replace(params, stop_token_ids=params.stop_token_ids + extra_eos)
        return params

    def abort(self, request_ids: str | Iterable[str]) -> None:
        """Abort requests (unknown or finished ids are ignored); their blocks are freed now."""
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        for req in self.scheduler.abort_requests(ids):
            self._states.pop(req.request_id, None)
            self.structured.remove(req.request_id)

    def release_job(self, job_id: str) -> bool:
        """The client says the job is over: the job table tells every listener (the policy ends its pin,
        the estimator ends the job). Idempotent; returns whether a pin existed."""
        return self.scheduler.release_job(job_id)

    def knows_job(self, job_id: str) -> bool:
        """Whether ``job_id`` is a live job here, as its record in the job table says: the estimator
        counts its turns, or it holds a lease (``JobRecord.is_live``)."""
        record = self.scheduler.jobs.get(job_id)
        return record is not None and record.is_live()

    def listen_to_jobs(self, listener: JobListener) -> None:
        """Tell ``listener`` of every later job event, after the engine's own listeners (call before
        the engine thread starts, or on it)."""
        self.scheduler.jobs.listen(listener)

    def holds_pins(self) -> bool:
        """Whether the policy holds any job's blocks now (their TTLs must be run down even while idle)."""
        return self.scheduler.policy.holds_leases()

    def release_all_jobs(self) -> int:
        """End every pin (shutdown); each is counted as released. Returns how many there were."""
        jobs = self.scheduler.policy.stats(self.clock.now()).pinned_jobs
        return sum(self.release_job(job_id) for job_id in jobs)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    # ---- the step ----------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        t0 = time.perf_counter()
        out = self.scheduler.schedule()
        if out.is_empty and not out.finished_req_ids and not out.kv_copies:
            return []
        try:
            grammar = self.structured.bitmask_for(out.scheduled) if self.structured.active else None
            res = self.runner.execute(out) if grammar is None else self.runner.execute(out, grammar=grammar)
        except Exception:  # One bad batch must not kill the engine: fail its requests, keep serving.
            logger.exception("model step failed; failing %d requests", len(out.scheduled))
            self.num_failed_steps += 1
            return self._fail_batch([s.request_id for s in out.scheduled])
        t1 = time.perf_counter()
        # Read before ``update``, which refreshes the views of requests that go on to their next token.
        work = out.work() if self.step_listeners else {}
        results = self._fail_requests(res.failed) if res.failed else []
        step = self.scheduler.update(out, res)
        reasons, lps, tops = step.finish_reasons, step.logprobs, step.top_logprobs
        if self.structured.active:
            results += self._advance_grammars(step.request_ids, step.token_ids, reasons)
        with_logprobs = bool(lps or tops)
        for rid, tok in zip(step.request_ids, step.token_ids, strict=True):
            st = self._states.get(rid)
            if st is None:
                continue
            lp, top = logprobs_of(rid, lps, tops) if with_logprobs else NO_LOGPROBS
            try:
                results.append(self._process(st, [tok], reasons.get(rid), lp, top))
            except Exception:  # one request's detokenization or stop check fails: only it ends
                logger.exception("output processing failed for %s", rid)
                results.extend(self._fail_requests({rid: "output processing failed"}))
        if self.step_listeners:
            info = {"step_seconds": time.perf_counter() - t0, "model_seconds": t1 - t0, **work}
            for fn in self.step_listeners:
                fn(info)
        return results

    def _process(self, st: RequestState, new_ids: list[int], finish_reason: str | None,
                 new_logprobs: Sequence[float], new_top: Sequence[list[tuple[int, float]]]) -> RequestOutput:
        """Take a request's new tokens: text, stop strings (which finish it), its output for the caller."""
        finish_reason, stop_string_hit = st.take(new_ids, finish_reason, new_logprobs, new_top)
        if stop_string_hit and not st.request.is_finished:
            self.scheduler.finish_requests([st.request.request_id], RequestStatus.FINISHED_STOPPED)
        if finish_reason is not None:
            self._on_request_finished(st)
        return st.output(new_ids, finish_reason)

    def _advance_grammars(self, request_ids: list[str], token_ids: list[int],
                          reasons: dict[str, str]) -> list[RequestOutput]:
        """Feed constrained requests their new tokens; finish those whose output is complete (reason
        ``stop``) and fail those whose token broke the grammar."""
        complete, failed = self.structured.advance(request_ids, token_ids)
        done = [rid for rid in complete if rid not in reasons]
        if done:
            self.scheduler.finish_requests(done, RequestStatus.FINISHED_STOPPED)
            reasons.update(dict.fromkeys(done, "stop"))
        return self._fail_requests(failed) if failed else []

    def _on_request_finished(self, st: RequestState) -> None:
        self._states.pop(st.request.request_id, None)
        self.structured.remove(st.request.request_id)
        if self.job_inference is not None:
            self.job_inference.on_finished(st.request)

    def _fail_requests(self, why: dict[str, str]) -> list[RequestOutput]:
        """Fail just these requests (their own sampling or output failed); the others go on."""
        for rid, reason in why.items():
            logger.warning("request %s failed: %s", rid, reason)
        return self._fail_batch(list(why))

    def _fail_batch(self, request_ids: list[str]) -> list[RequestOutput]:
        states = [self._states.get(r) for r in request_ids]
        self.scheduler.abort_requests(request_ids)
        outs = []
        for st in filter(None, states):
            req = st.request
            self._states.pop(req.request_id, None)
            self.structured.remove(req.request_id)
            outs.append(st.error_output())
        return outs

    # ---- observability -----------------------------------------------------------------------
    def stats(self) -> EngineStats:
        """One snapshot of every source's counters (``engine_stats``): scheduler and KV pool, the
        second tier's host store, the estimators, the output grammars, job inference."""
        store = self.runner.offload
        tier_store = (TierStoreStats(store.nbytes, store.load_seconds, store.save_seconds, store.kind)
                      if store is not None else None)
        return EngineStats(
            scheduler=self.scheduler.stats(), num_failed_steps=self.num_failed_steps,
            max_model_len=self.max_model_len, block_size=self.sched_config.block_size,
            jobs=JobStats.of(self.job_hooks.stats()), grammar=self.structured.stats(), tier_store=tier_store,
            job_inference=self.job_inference.stats() if self.job_inference is not None else None)

    def routing_stats(self) -> RoutingStats:
        """What a request router asks of this engine (``RoutingStats``): held and active jobs, free
        blocks, queue lengths."""
        s = self.scheduler
        pool = s.kv.pool
        return RoutingStats(
            leases=tuple(s.held_jobs()), active_jobs=tuple(sorted({r.job_id for r in s.requests.values() if r.job_id})),
            free_blocks=int(pool.num_free_blocks), num_blocks=int(pool.num_blocks - 1),
            num_waiting=len(s.waiting), num_running=len(s.running))

    def close(self) -> None:
        self.structured.close()
        if self._close_trace is not None:
            self._close_trace()
            self._close_trace = None
