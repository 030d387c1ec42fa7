"""A finished model step, taken into the scheduler's requests (``Scheduler.update``).

Per scheduled request: advance ``num_computed_tokens``, register blocks the step filled (a block can
only have filled up if the chunk crossed a block boundary), append the sampled token, apply the stop
rules (only EOS, a stop token or a length limit can stop a request, so the full rule set runs only
for those), finish what stopped, and add the token to the step's ``StepOutputs`` columns. A request
that goes on gets its view refreshed to its next decode token and, when that token opens a block, a
place in the ``DecodeStreak`` (``scheduler.steady_decode``). This is the per-request hot path of
every step: one pass, lookups hoisted into locals on purpose, no object built per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.outputs import ModelRunnerOutput, SchedulerOutput, StepOutputs
from scheduler.request import RequestStatus
from scheduler.steady_decode import DecodeStreak

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler


def apply_runner_output(sched: Scheduler, out: SchedulerOutput, result: ModelRunnerOutput) -> StepOutputs:
    """Take the step in (see the module docstring); leaves ``sched.decode_streak`` when every running
    request was sampled and goes on."""
    now, ids, toks, reasons, opening_block, going_on = sched.clock.now(), [], [], {}, [], 0
    add_id, add_tok, sampled = ids.append, toks.append, result.sampled_token_ids
    requests, running, max_len = sched.requests, RequestStatus.RUNNING, sched.config.max_model_len
    caching, num_cached, bs = sched.kv.enable_caching, sched.kv.num_cached, sched.config.block_size
    for s in out.scheduled:
        req = requests.get(rid := s.request_id)
        if req is None or req.status is not running:
            continue  # aborted while the step ran
        n = len(s.token_ids)
        computed = req.num_computed_tokens = req.num_computed_tokens + n
        if caching and (n >= bs or computed % bs < n) and computed // bs > num_cached.get(rid, 0):
            sched.kv.cache_computed_blocks(req)
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
            sched._finish(req, status, now)
            reasons[rid] = status.finish_reason()
        else:
            s.token_ids, s.num_computed_tokens, s.do_sample, s.num_output_tokens = [tok], computed, True, len(out_ids)
            going_on += 1
            if computed >= len(s.block_ids) * bs:
                opening_block.append(req)
        add_id(rid)
        add_tok(tok)
    sched.decode_streak = DecodeStreak(going_on, opening_block) if going_on == len(sched.running) else None
    return StepOutputs(ids, toks, reasons, result.logprobs, result.top_logprobs)
