"""Steady decode in bulk: the common step of a busy engine, scheduled without the general loop.

When every running request has exactly one token to compute and the token budget covers them all,
the step is each running request's decode token, in admission order; only a request whose next
token starts a new block calls the KV manager. Each request's ``ScheduledRequest`` is its own
(``Request.scheduled_view``, made at admission), refreshed in place.
"""

from __future__ import annotations

from scheduler.kv_cache_manager import KVCacheManager
from scheduler.outputs import ScheduledRequest
from scheduler.request import Request


def schedule_steady_decode(running: list[Request], kv: KVCacheManager,
                           budget: int) -> dict[str, ScheduledRequest] | None:
    """The step's chunks by request id, or None when the step is not steady decode or a block
    allocation fails (the general loop then does the step; the blocks allocated here are exactly
    the ones it would have allocated first, in the same order, so nothing needs undoing)."""
    if not running or len(running) > budget:
        return None
    # Admission appends, so a request still prefilling is most likely last: look there first, so a
    # step that is not steady decode is told apart before any view is touched.
    last = running[-1]
    if len(last.all_token_ids) - last.num_computed_tokens != 1:
        return None
    bs, allocate = kv.block_size, kv.allocate_slots
    for req in running:
        start, toks, view = req.num_computed_tokens, req.all_token_ids, req.scheduled_view
        if len(toks) - start != 1:
            return None
        if start >= len(view.block_ids) * bs and allocate(req, 1) is None:
            return None
        view.token_ids = toks[start:]
        view.num_computed_tokens = start
        view.do_sample = True
        view.num_output_tokens = len(req.output_token_ids)
    return {req.request_id: req.scheduled_view for req in running}
