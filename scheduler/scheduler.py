"""The scheduler: one token budget per step over running and waiting requests.

Every request has ``num_computed_tokens`` catching up with ``num_tokens``; chunked prefill, prefix
hits and decode are one mechanism. Per step: running requests first (in admission order); if an
allocation fails, soft pin tails give way, then pins are released under pressure, then a victim is
preempted (all its blocks freed; it is recomputed later). Waiting requests are admitted in policy
order only when nothing was preempted in this step; an admission may take the soft tails of jobs
later in program order than its own (all of them when nothing runs). Invariants, checked by the
blast tests:
- a request is in exactly one of ``waiting``, ``running`` or neither (finished);
- every block is free or referenced (by running requests or pin leases), never both;
- a pinned block is never handed to another request while its lease lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.clock import Clock, MonotonicClock
from scheduler.config import SchedulerConfig, SchedulingPolicy
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.outputs import EngineCoreOutput, ModelRunnerOutput, ScheduledRequest, SchedulerOutput
from scheduler.pins import PinTable
from scheduler.request import Request, RequestStatus
from scheduler.waiting_queue import WaitingQueue

# Given a finished non-final turn of a job, how long (seconds) to pin its blocks; 0 = don't pin.
PinTTLFn = Callable[[Request], float]
# Receives one JSON-able dict per event (step snapshots, admissions); None = tracing off.
TraceSink = Callable[[dict], None]


@dataclass
class SchedulerStats:
    num_running: int
    num_waiting: int
    num_blocks: int
    blocks_in_use: int
    blocks_cached_free: int
    blocks_empty: int
    blocks_pinned: int
    blocks_soft: int
    prefix_query_tokens: int
    prefix_hit_tokens: int
    num_preemptions: int
    num_pinned_jobs: int
    pins: dict[str, float] = field(default_factory=dict)


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        clock: Clock | None = None,
        pin_ttl_fn: PinTTLFn | None = None,
        trace_sink: TraceSink | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or MonotonicClock()
        self.pin_ttl_fn = pin_ttl_fn
        self.trace_sink = trace_sink
        self.kv = KVCacheManager(config.num_blocks, config.block_size, config.enable_prefix_caching)
        max_pinned = int(config.max_pinned_fraction * (config.num_blocks - 1))
        self.pins = PinTable(max_pinned_blocks=max_pinned, release_fn=self.kv.free_block_list,
                             soft=config.soft_pins, soft_grace=config.soft_pin_grace)
        self.waiting = WaitingQueue(config.policy, self.pins.has_pin)
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self._finished_ids: set[str] = set()
        self.num_preemptions = 0
        self.num_steps = 0
        # (request id, pool.num_frees, prefix hits, token budget, pins.version, pool.num_evictions or -1
        # when no hit was evictable) of the last failed admission; see ``_still_blocked``.
        self._blocked: tuple[str, int, int, int, int, int] | None = None

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
        self.requests[request.request_id] = request
        self.waiting.add(request)
        if request.job_id is not None:
            self.pins.mark_returned(request.job_id)

    def abort_requests(self, request_ids: Iterable[str]) -> list[Request]:
        """Abort waiting or running requests (unknown ids are ignored); their jobs' pins end too."""
        aborted = []
        now = self.clock.now()
        for rid in request_ids:
            req = self.requests.get(rid)
            if req is None:
                continue
            if req.job_id is not None:
                self.pins.release(req.job_id, now, "aborted")
            self._finish(req, RequestStatus.FINISHED_ABORTED, now, allow_pin=False)
            aborted.append(req)
        return aborted

    def finish_requests(self, request_ids: Iterable[str], status: RequestStatus) -> None:
        """Finish requests from outside (e.g. the engine found a stop string)."""
        now = self.clock.now()
        for rid in request_ids:
            req = self.requests.get(rid)
            if req is not None:
                self._finish(req, status, now, allow_pin=True)

    def release_job(self, job_id: str) -> bool:
        """End a job's pin (the client said the job is over). Idempotent."""
        return self.pins.release(job_id, self.clock.now(), "released")

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    # ---- the step ----------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        cfg = self.config
        now = self.clock.now()
        self.num_steps += 1
        out = SchedulerOutput(finished_req_ids=self._finished_ids)
        self._finished_ids = set()
        if self.pins.leases:
            self.pins.sweep(now)

        budget = cfg.max_num_batched_tokens
        threshold = cfg.long_prefill_token_threshold
        scheduled: dict[str, ScheduledRequest] = {}
        preempted: list[Request] = []

        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            num_new = len(req.all_token_ids) - req.num_computed_tokens
            if threshold and num_new > threshold:
                num_new = threshold
            if num_new > budget:
                num_new = budget
            if num_new <= 0:
                i += 1
                continue
            while True:
                if self.kv.allocate_slots(req, num_new) is not None:
                    break
                if self.pins.leases and (
                    self.pins.yield_soft(now, exclude_job=req.job_id)
                    or self.pins.release_latest(now, exclude_job=req.job_id)
                ):
                    continue
                victim = self._pick_victim()
                vi = self.running.index(victim)
                self._preempt(victim)
                preempted.append(victim)
                sr = scheduled.pop(victim.request_id, None)
                if sr is not None:
                    budget += sr.num_scheduled_tokens
                if vi < i:
                    i -= 1
                if victim is req:
                    break
            if req.status is not RequestStatus.RUNNING:
                continue  # ``req`` itself was preempted; index i now names the next request.
            scheduled[req.request_id] = self._make_scheduled(req, num_new)
            budget -= num_new
            i += 1

        new_ids: list[str] = []
        resumed_ids: list[str] = []
        if not preempted:
            self.waiting.order(self.pins.version)
            while len(self.waiting) and budget > 0 and len(self.running) < cfg.max_num_seqs:
                req = self.waiting.peek()
                if self._still_blocked(req, budget):
                    break
                hits, num_hit = self.kv.get_computed_blocks(req)
                num_new = req.num_tokens - num_hit
                if threshold:
                    num_new = min(num_new, threshold)
                num_new = min(num_new, budget)
                if self.kv.allocate_slots(req, num_new, hits) is None:
                    # Program order: a turn takes soft tails of later jobs, never of earlier ones
                    # while the engine is busy (they are coming back to a cache kept for them), and
                    # only if that is enough to admit it (no tail is given up for nothing).
                    if self.pins.num_soft_blocks:
                        rank = req.job_arrival_time if self.running else None
                        short = self.kv.blocks_short(req, num_new, hits)
                        if (not self.running or short <= self.pins.soft_blocks_after(rank, req.job_id)) and (
                            self.pins.yield_soft(now, exclude_job=req.job_id, before_rank=rank)
                        ):
                            continue
                    # Pins never make an admission wait forever: with nothing running, nothing
                    # else will free blocks, so leases give way (latest expected return first).
                    if not self.running and self.pins.leases:
                        if self.pins.release_latest(now, exclude_job=req.job_id) or self.pins.release(
                            req.job_id, now, "early_released"
                        ):
                            continue
                    pool = self.kv.pool
                    evictions = pool.num_evictions if any(b.ref_cnt == 0 for b in hits) else -1
                    self._blocked = (req.request_id, pool.num_frees, len(hits), budget, self.pins.version, evictions)
                    break
                self._blocked = None
                self.waiting.pop()
                resumed = req.status is RequestStatus.PREEMPTED
                req.status = RequestStatus.RUNNING
                req.num_computed_tokens = num_hit
                self.running.append(req)
                self.kv.record_prefix_query(req.num_tokens, num_hit)
                if req.num_cached_tokens < 0:
                    req.num_cached_tokens = num_hit
                    req.first_scheduled_time = now
                if req.job_id is not None and self.pins.has_pin(req.job_id):
                    # The job is back: its prefix hit holds its own references now.
                    req.pin_hit = True
                    self.pins.release(req.job_id, now, "hit")
                (resumed_ids if resumed else new_ids).append(req.request_id)
                scheduled[req.request_id] = self._make_scheduled(req, num_new)
                budget -= num_new
                if self.trace_sink is not None:
                    self.trace_sink(
                        {"event": "admit", "t": now, "step": self.num_steps, "request_id": req.request_id,
                         "job_id": req.job_id, "prompt_tokens": req.num_tokens, "hit_tokens": num_hit,
                         "resumed": resumed}
                    )

        out.scheduled = list(scheduled.values())
        out.preempted_req_ids = {r.request_id for r in preempted}
        out.new_req_ids = new_ids
        out.resumed_req_ids = resumed_ids
        if self.trace_sink is not None:
            self._trace_step(now, out)
        return out

    def update(self, out: SchedulerOutput, result: ModelRunnerOutput) -> list[EngineCoreOutput]:
        """Advance computed tokens, append sampled tokens, apply stop rules, finish requests."""
        now = self.clock.now()
        outputs: list[EngineCoreOutput] = []
        sampled = result.sampled_token_ids
        requests = self.requests
        running = RequestStatus.RUNNING
        logprobs = result.logprobs
        top_logprobs = result.top_logprobs
        max_len = self.config.max_model_len
        caching = self.kv.enable_caching
        num_cached = self.kv.num_cached
        bs = self.config.block_size
        for s in out.scheduled:
            rid = s.request_id
            req = requests.get(rid)
            if req is None or req.status is not running:
                continue  # aborted while the step ran
            req.num_computed_tokens += len(s.token_ids)
            if caching and req.num_computed_tokens // bs > num_cached.get(rid, 0):
                self.kv.cache_computed_blocks(req)
            if not s.do_sample:
                continue
            tok = sampled.get(rid)
            if tok is None:
                continue
            lp = logprobs.get(rid) if logprobs else None
            req.append_output_token(tok)
            if req.first_token_time is None:
                req.first_token_time = now
            sp = req.sampling_params
            # Fast path: nothing can stop a request below its limits that sampled neither EOS nor a
            # stop token; only then is the full rule set consulted.
            if (tok == req.eos_token_id or sp.stop_token_ids or len(req.output_token_ids) >= sp.max_tokens
                    or len(req.all_token_ids) >= max_len):
                status = self._check_stop(req, tok)
            else:
                status = None
            o = EngineCoreOutput(rid, [tok], None, (), (), req.num_cached_tokens if req.num_cached_tokens > 0 else 0)
            if lp is not None:
                o.new_logprobs = [lp]
            if top_logprobs:
                top = top_logprobs.get(rid)
                if top is not None:
                    o.new_top_logprobs = [top]
            if status is not None:
                self._finish(req, status, now, allow_pin=True)
                o.finish_reason = status.finish_reason()
            outputs.append(o)
        return outputs

    # ---- internals ---------------------------------------------------------------------------
    def _still_blocked(self, req: Request, budget: int) -> bool:
        """O(1) proof that the head request still cannot be admitted, sparing a prefix re-walk.

        True only if the same request failed last time, no block was freed since (free capacity
        cannot have grown), no lease changed (no new soft tail it may take), the budget is not
        smaller (its chunk needs no fewer blocks), its prefix hit cannot have grown (the next block
        of its chain is still uncached) nor shrunk (when some hit sat in the free queue, no cached
        block was evicted since: losing an evictable hit can make a budget-limited chunk cheaper),
        and requests are running (with none running, blocked admission must reach the pin-release
        path).
        """
        b = self._blocked
        if b is None or b[0] != req.request_id or not self.running:
            return False
        _, frees, num_hits, prev_budget, pin_version, evictions = b
        pool = self.kv.pool
        if frees != pool.num_frees or budget < prev_budget or pin_version != self.pins.version:
            return False
        if evictions >= 0 and evictions != pool.num_evictions:
            return False
        if num_hits < (req.num_tokens - 1) // self.config.block_size and self.config.enable_prefix_caching:
            if req.block_hashes[num_hits] in self.kv.pool.cached_block_map:
                return False
        return True

    def _make_scheduled(self, req: Request, num_new: int) -> ScheduledRequest:
        start = req.num_computed_tokens
        toks = req.all_token_ids
        return ScheduledRequest(
            req.request_id, toks[start : start + num_new], start, self.kv.req_block_ids[req.request_id],
            req.sampling_params, start + num_new == len(toks), len(req.output_token_ids), req.eos_token_id,
        )

    def _check_stop(self, req: Request, tok: int) -> RequestStatus | None:
        sp = req.sampling_params
        n_out = len(req.output_token_ids)
        if n_out >= sp.min_tokens:
            if tok == req.eos_token_id and not sp.ignore_eos:
                return RequestStatus.FINISHED_STOPPED
            if sp.stop_token_ids and tok in sp.stop_token_ids:
                return RequestStatus.FINISHED_STOPPED
        if n_out >= sp.max_tokens or len(req.all_token_ids) >= self.config.max_model_len:
            return RequestStatus.FINISHED_LENGTH_CAPPED
        return None

    def _pick_victim(self) -> Request:
        policy = self.config.policy
        if policy is SchedulingPolicy.FCFS:
            return self.running[-1]
        if policy is SchedulingPolicy.PRIORITY:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        has_pin = self.pins.has_pin
        return max(self.running, key=lambda r: (not has_pin(r.job_id), r.job_arrival_time, r.arrival_time))

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        self.kv.free(req)
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.add(req)

    def _finish(self, req: Request, status: RequestStatus, now: float, allow_pin: bool) -> None:
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.status = status
        req.finished_time = now
        del self.requests[req.request_id]
        self.waiting.forget(req.request_id)
        self._finished_ids.add(req.request_id)
        ttl = 0.0
        if (
            allow_pin
            and self.config.policy is SchedulingPolicy.CONTINUUM
            and req.job_id is not None
            and not req.is_last_step
            and self.pin_ttl_fn is not None
            and req.request_id in self.kv.req_blocks
        ):
            ttl = self.pin_ttl_fn(req)
        if ttl > 0:
            # The pin table takes the blocks over: it keeps the prefix it pins and frees the rest.
            self.pins.pin(req.job_id, req.request_id, self.kv.take_blocks(req.request_id), ttl, now,
                          rank=req.job_arrival_time)
        else:
            self.kv.free(req)

    # ---- observability -----------------------------------------------------------------------
    def stats(self) -> SchedulerStats:
        pool = self.kv.pool
        return SchedulerStats(
            num_running=len(self.running),
            num_waiting=len(self.waiting),
            num_blocks=pool.num_blocks - 1,
            blocks_in_use=pool.num_used_blocks,
            blocks_cached_free=pool.num_cached_free,
            blocks_empty=pool.num_empty_blocks,
            blocks_pinned=self.pins.num_pinned_blocks,
            blocks_soft=self.pins.num_soft_blocks,
            prefix_query_tokens=self.kv.prefix_query_tokens,
            prefix_hit_tokens=self.kv.prefix_hit_tokens,
            num_preemptions=self.num_preemptions,
            num_pinned_jobs=len(self.pins.leases),
            pins=self.pins.counters.as_dict(),
        )

    def _trace_step(self, now: float, out: SchedulerOutput) -> None:
        assert self.trace_sink is not None
        pool = self.kv.pool
        self.trace_sink(
            {
                "event": "step", "t": now, "step": self.num_steps,
                "waiting": len(self.waiting), "running": len(self.running),
                "blocks_empty": pool.num_empty_blocks, "blocks_cached_free": pool.num_cached_free,
                "blocks_in_use": pool.num_used_blocks, "blocks_pinned": self.pins.num_pinned_blocks,
                "blocks_soft": self.pins.num_soft_blocks,
                "pinned_jobs": sorted(self.pins.leases),
                "scheduled_new": len(out.new_req_ids), "scheduled_resumed": len(out.resumed_req_ids),
                "scheduled_running": len(out.scheduled) - len(out.new_req_ids) - len(out.resumed_req_ids),
                "preempted": sorted(out.preempted_req_ids), "tokens": out.total_num_scheduled_tokens,
            }
        )
