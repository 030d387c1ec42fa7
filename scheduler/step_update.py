"""A finished model step, taken into the scheduler's requests (``Scheduler.update``).

Per scheduled request: advance ``num_computed_tokens``, register blocks the step filled, append the
sampled token, apply the stop rules, finish what stopped, and add the token to the step's
``StepOutputs`` columns. This is the per-request hot path of every step: one pass, lookups hoisted
into locals on purpose, no object built per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.outputs import ModelRunnerOutput, SchedulerOutput, StepOutputs
from scheduler.request import RequestStatus

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler


def apply_runner_output(sched: Scheduler, out: SchedulerOutput, result: ModelRunnerOutput) -> StepOutputs:
    """Advance computed tokens, append sampled tokens, apply stop rules, finish requests (the hot
    path of every step: one pass, lookups hoisted into locals on purpose)."""
    now = sched.clock.now()
    ids: list[str] = []
    toks: list[int] = []
    reasons: dict[str, str] = {}
    add_id, add_tok = ids.append, toks.append
    sampled = result.sampled_token_ids
    requests, running, max_len = sched.requests, RequestStatus.RUNNING, sched.config.max_model_len
    caching, num_cached, bs = sched.kv.enable_caching, sched.kv.num_cached, sched.config.block_size
    for s in out.scheduled:
        req = requests.get(rid := s.request_id)
        if req is None or req.status is not running:
            continue  # aborted while the step ran
        n = len(s.token_ids)
        computed = req.num_computed_tokens = req.num_computed_tokens + n
        # A block can only have filled up if this chunk crossed a block boundary.
        if caching and (n >= bs or computed % bs < n) and computed // bs > num_cached.get(rid, 0):
            sched.kv.cache_computed_blocks(req)
        if not s.do_sample or (tok := sampled.get(rid)) is None:
            continue
        req.output_token_ids.append(tok)
        (all_ids := req.all_token_ids).append(tok)
        if (total := len(all_ids)) % bs == 0:
            req._extend_block_hashes()
        if req.first_token_time is None:
            req.first_token_time = now
        # Only EOS, a stop token or a length limit can stop a request: else skip the full rule set.
        if (tok in req.stop_candidates or total >= req.length_limit) and (
                status := req.stop_status(tok, max_len)) is not None:
            sched._finish(req, status, now)
            reasons[rid] = status.finish_reason()
        add_id(rid)
        add_tok(tok)
    return StepOutputs(ids, toks, reasons, result.logprobs, result.top_logprobs)
