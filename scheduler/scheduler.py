"""The scheduler: one token budget per step over running and waiting requests.

Every request has ``num_computed_tokens`` catching up with ``num_tokens``; chunked prefill, prefix
hits and decode are one mechanism. A step (``schedule``) is four named steps:
1. ``policy.on_time``: the policy lets time-bound holdings (CONTINUUM leases) run out.
2. ``_schedule_running``: running requests in admission order, each its next chunk (all-decode
   steps in bulk: ``scheduler.steady_decode``). If an allocation
   fails, the policy may free what it holds (``on_allocation_failed``); otherwise a victim is
   preempted (all its blocks freed; it is recomputed later): from the tenant furthest over its KV
   share when the asking request's tenant is within its own, else the policy's.
3. ``_admit_waiting`` (``scheduler.admission``): only when nothing was preempted in this step,
   waiting requests in policy order, stopping at the first that does not fit; with several tenants a
   request within its tenant's KV share may pass a blocked head (``scheduler.tenant_shares``).
4. ``_emit_output``: the step's ``SchedulerOutput`` (and a trace event).
Every policy decision goes through ``scheduler.policy.SchedulingPolicy``; this module knows nothing
of pins. A job's events (a turn arrives, is admitted, ends or is aborted; the client releases the job)
are published once, by the scheduler's ``JobTable`` (``scheduler.job_table``), to its listeners in a
fixed order: the estimator the scheduler is wired with (first: it writes what the policy reads), the
policy, the second KV tier and the prefetcher (then whatever registers later); each intake, admission
or finish publishes one event. A request leaves by one path, ``_finish``: out of its queue, its turn's
end (or abort) published while it still holds its blocks (the policy may take them over: a pin), then
whatever it still holds freed.
Invariants, checked by ``scheduler.invariants`` in the blast tests:
- a request is in exactly one of ``waiting``, ``running`` or neither (finished);
- every block is free or referenced (by running requests or by the policy's leases), never both;
- a pinned block is never handed to another request while its lease lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler.admission import Admission, StepDraft
from scheduler.admission_memo import BlockedAdmissionMemo
from scheduler.clock import Clock, MonotonicClock
from scheduler.config import SchedulerConfig
from scheduler.job_table import JobListener, JobTable
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.kv_prefetch import Prefetcher
from scheduler.observability import QueueCounts, SchedulerStats, stats_snapshot, step_event
from scheduler.policy import make_policy
from scheduler.request import Request, RequestStatus
from scheduler.steady_decode import DecodeStreak, schedule_steady_decode
from scheduler.step_io import ModelRunnerOutput, SchedulerOutput, StepOutputs
from scheduler.waiting_queue import WaitingQueue

# Receives one JSON-able dict per event (step snapshots, admissions); None = tracing off.
TraceSink = Callable[[dict], None]


class Scheduler(Admission):
    def __init__(self, config: SchedulerConfig, clock: Clock | None = None, trace_sink: TraceSink | None = None,
                 estimator: JobListener | None = None, jobs: JobTable | None = None) -> None:
        """``estimator``: the job listener told of each job event first (the engine's and the simulator's
        estimator hooks, ``agent_engine.engine.job_hooks``: it writes the job's first arrival, the ended
        turn's pin TTL and the job's expected return onto the record); without one, no turn is pinned
        and nothing is prefetched. ``jobs``: the table it keeps its per-job state on (a new one if None)."""
        self.config = config
        self.clock = clock or MonotonicClock()
        self.trace_sink = trace_sink
        self.decode_streak: DecodeStreak | None = None  # left by update for the next schedule
        self.jobs = jobs if jobs is not None else JobTable()  # one record per job, one stream of its events
        self.kv = KVCacheManager(config.num_blocks, config.block_size, config.enable_prefix_caching,
                                 config.num_offload_blocks, self.clock, self.jobs)
        self.policy = make_policy(config, self.kv, self.jobs)
        # With a second tier and an estimator (its return forecasts on the records): demoted jobs go back
        # up ahead of their turn.
        self.prefetcher = (Prefetcher(self.kv, config.prefetch_horizon)
                           if self.kv.tier is not None and estimator is not None and config.prefetch_horizon > 0
                           else None)
        for listener in (estimator, self.policy, self.kv.tier, self.prefetcher):
            if listener is not None:
                self.jobs.listen(listener)
        self.waiting = WaitingQueue(self.policy.waiting_key, self.policy.state_version)
        self.admission_memo = BlockedAdmissionMemo(self.kv, self.policy)
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self._tenant_requests: dict[str | None, int] = {}  # unfinished requests per tenant
        self._finished_ids: set[str] = set()
        self.num_preemptions = 0
        self.num_steps = 0

    # ---- intake ------------------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        if request.block_size != self.config.block_size:
            raise ValueError("request block_size does not match the scheduler's")
        if request.num_tokens >= self.config.max_model_len:
            raise ValueError(
                f"prompt has {request.num_tokens} tokens; max_model_len is {self.config.max_model_len}"
            )
        request.length_limit = min(request.length_limit, self.config.max_model_len)
        self.jobs.arrive(request, self.clock.now())  # a listener that raises leaves the request out
        self.requests[request.request_id] = request
        self._tenant_requests[request.tenant] = self._tenant_requests.get(request.tenant, 0) + 1
        self.waiting.add(request)

    def abort_requests(self, request_ids: Iterable[str]) -> list[Request]:
        """Abort waiting or running requests (unknown ids are ignored); their jobs' pins end too."""
        aborted = []
        now = self.clock.now()
        for rid in request_ids:
            req = self.requests.get(rid)
            if req is None:
                continue
            self._finish(req, RequestStatus.FINISHED_ABORTED, now)
            aborted.append(req)
        return aborted

    def finish_requests(self, request_ids: Iterable[str], status: RequestStatus) -> None:
        """Finish requests from outside (e.g. the engine found a stop string)."""
        now = self.clock.now()
        for rid in request_ids:
            req = self.requests.get(rid)
            if req is not None:
                self._finish(req, status, now)

    def release_job(self, job_id: str) -> bool:
        """The client said the job is over: its record ends and every listener is told (the policy
        ends its lease). Idempotent; an unknown job is a no-op. Returns whether the policy held
        something for the job."""
        held = self.policy.holds_job(job_id)
        self.jobs.release(job_id, self.clock.now())
        return held

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def held_jobs(self) -> list[str]:
        """Jobs whose KV waits here for their next turn, sorted: the policy's leases and, with a second
        tier, the jobs with blocks in it (what a router sends a job's turns back for)."""
        jobs = set(self.policy.stats(self.clock.now()).pinned_jobs)
        if self.kv.tier is not None:
            jobs.update(self.kv.tier.held_job_ids())
        return sorted(jobs)

    # ---- the step ----------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        step = StepDraft(now=self.clock.now(), budget=self.config.max_num_batched_tokens)
        self.num_steps += 1
        self.policy.on_time(step.now)  # leases whose time ran out end or turn soft
        streak, self.decode_streak = self.decode_streak, None
        decodes = schedule_steady_decode(self.running, self.kv, step.budget, streak)
        if decodes is None:
            self._schedule_running(step)
        else:
            step.scheduled, step.budget = decodes, step.budget - len(decodes)
        if not step.preempted:
            self._admit_waiting(step)
            if self.prefetcher is not None and not len(self.waiting):
                self.prefetcher.step(step.now, len(self.running))
        return self._emit_output(step)

    def _schedule_running(self, step: StepDraft) -> None:
        """Each running request's next chunk, in admission order, while the budget lasts (the budget
        lives in a local on this hot path; ``_make_room`` works on ``step.budget``). A chunk that fits
        in the blocks already held (all decode steps but one per block) skips the KV manager."""
        running, scheduled, allocate = self.running, step.scheduled, self.kv.allocate_slots
        block_ids, bs, budget = self.kv.req_block_ids, self.config.block_size, step.budget
        threshold = self.config.long_prefill_token_threshold
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            toks, start = req.all_token_ids, req.num_computed_tokens
            num_new = len(toks) - start
            if threshold and num_new > threshold:
                num_new = threshold
            if num_new > budget:
                num_new = budget
            if num_new <= 0:
                i += 1
                continue
            ids = block_ids.get(rid := req.request_id)
            if (ids is None or start + num_new > len(ids) * bs) and allocate(req, num_new) is None:
                step.budget = budget
                i = self._make_room(step, req, num_new, i)
                budget = step.budget
                if req.status is not RequestStatus.RUNNING:
                    continue  # ``req`` itself was preempted; index i now names the next request.
            end = start + num_new
            view = scheduled[rid] = req.scheduled_view
            view.token_ids = toks[start:end]
            view.num_computed_tokens = start
            view.do_sample = end == len(toks)
            view.num_output_tokens = len(req.output_token_ids)
            budget -= num_new
            i += 1
        step.budget = budget

    def _make_room(self, step: StepDraft, req: Request, num_new: int, i: int) -> int:
        """Free blocks until ``req`` (``running[i]``) gets its chunk or is itself preempted: the policy
        frees what it holds first, then its victims are preempted (a preempted request scheduled
        earlier in this step gives its tokens back). Returns ``req``'s index after the preemptions."""
        while True:
            if not self.policy.on_allocation_failed(req, step.now):
                victim = self._fair_victim(req.tenant, self.running) or self.policy.pick_victim(self.running)
                vi = self.running.index(victim)
                self._preempt_in_step(step, victim)
                if vi < i:
                    i -= 1
                if victim is req:
                    return i
            if self.kv.allocate_slots(req, num_new) is not None:
                return i

    def _emit_output(self, step: StepDraft) -> SchedulerOutput:
        out = SchedulerOutput(list(step.scheduled.values()), self._finished_ids,
                              {r.request_id for r in step.preempted}, step.new_ids, step.resumed_ids,
                              self.kv.take_copies())
        self._finished_ids = set()
        if self.trace_sink is not None:
            self.trace_sink(step_event(self._counts(), self.policy.stats(step.now), self.num_steps, step.now, out))
        return out

    def update(self, out: SchedulerOutput, result: ModelRunnerOutput) -> StepOutputs:
        """Take a finished model step in, per scheduled request: advance ``num_computed_tokens``, register
        filled blocks, append the sampled token, apply the stop rules (the full set only after EOS, a stop
        token or the length limit), finish what stopped, add the token to ``StepOutputs``; a request that
        goes on gets its next decode view and, opening a block, a place in the ``DecodeStreak``. The hot
        path of every step: one pass, lookups in locals, no object built per request."""
        now, ids, toks, reasons, opening_block, going_on = self.clock.now(), [], [], {}, [], 0
        add_id, add_tok, sampled = ids.append, toks.append, result.sampled_token_ids
        requests, running, max_len = self.requests, RequestStatus.RUNNING, self.config.max_model_len
        caching, num_cached, bs = self.kv.enable_caching, self.kv.num_cached, self.config.block_size
        for s in out.scheduled:
            req = requests.get(rid := s.request_id)
            if req is None or req.status is not running:
                continue  # aborted while the step ran
            n = len(s.token_ids)
            computed = req.num_computed_tokens = req.num_computed_tokens + n
            if caching and (n >= bs or computed % bs < n) and computed // bs > num_cached.get(rid, 0):
                self.kv.cache_computed_blocks(req)
            if not s.do_sample or (tok := sampled.get(rid)) is None:
                continue
            (out_ids := req.output_token_ids).append(tok)
            (all_ids := req.all_token_ids).append(tok)
            if (total := len(all_ids)) % bs == 0:
                req._extend_block_hashes()
            if req.first_token_time is None:
                req.first_token_time = now
            if (tok in req.stop_candidates or total >= req.length_limit) and (
                    status := req.stop_status(tok, max_len)) is not None:
                self._finish(req, status, now)
                reasons[rid] = status.finish_reason()
            else:
                s.token_ids, s.num_computed_tokens, s.do_sample, s.num_output_tokens = [tok], computed, True, len(out_ids)
                going_on += 1
                if computed >= len(s.block_ids) * bs:
                    opening_block.append(req)
            add_id(rid)
            add_tok(tok)
        self.decode_streak = DecodeStreak(going_on, opening_block) if going_on == len(self.running) else None
        return StepOutputs(ids, toks, reasons, result.logprobs, result.top_logprobs)

    # ---- internals ---------------------------------------------------------------------------
    def _preempt(self, req: Request) -> None:
        self.decode_streak = None
        self.running.remove(req)
        self.kv.free(req)
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.add(req)

    def _finish(self, req: Request, status: RequestStatus, now: float) -> None:
        """A request's one way out: out of its queue, its status and finish time set; the job table
        publishes the turn's end (or abort) while it still holds its blocks (the policy may take them
        over as a pin); then whatever it still holds is freed."""
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
            self.decode_streak = None
        elif req in self.waiting:
            self.waiting.remove(req)
        req.status = status
        req.finished_time = now
        del self.requests[req.request_id]
        left = self._tenant_requests.pop(req.tenant) - 1
        if left:
            self._tenant_requests[req.tenant] = left
        self.waiting.forget(req.request_id)
        self._finished_ids.add(req.request_id)
        try:
            if status is RequestStatus.FINISHED_ABORTED:
                self.jobs.abort(req, now)
            else:
                self.jobs.end_turn(req, now)
        finally:
            self.kv.free(req)

    # ---- observability -----------------------------------------------------------------------
    def stats(self) -> SchedulerStats:
        """Queue, pool and pin figures now (pin block-seconds live, up to now)."""
        return stats_snapshot(self._counts(), self.policy.stats(self.clock.now()))

    def _counts(self) -> QueueCounts:
        return QueueCounts(len(self.running), len(self.waiting), self.num_preemptions, self.kv)

