"""Steady decode in bulk: the common step of a busy engine, scheduled without the general loop.

When every running request has exactly one token to compute and the token budget covers them all,
the step is each running request's decode token, in admission order; only a request whose next
token starts a new block calls the KV manager. Each request's ``ScheduledRequest`` is its own
(``Request.scheduled_view``, made at admission), refreshed in place.

A :class:`DecodeStreak` is what ``update`` leaves when every running request was sampled in the
step it took in and goes on: ``update`` already refreshed their views to their next decode token, so
the next ``schedule`` checks nothing per request and calls the KV manager only for the requests
listed as opening a block. Anything that takes a request out of ``running`` (finish, abort,
preemption) drops the streak; ``schedule`` consumes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.kv_cache_manager import KVCacheManager
from scheduler.request import Request
from scheduler.step_io import ScheduledRequest


@dataclass(slots=True)
class DecodeStreak:
    """Left by ``update``: all ``num_running`` running requests were sampled and their views refreshed
    to their next decode token; ``opening_block`` lists (in ``running`` order) those whose next token
    is the first of a new block."""

    num_running: int
    opening_block: list[Request]


def schedule_steady_decode(running: list[Request], kv: KVCacheManager, budget: int,
                           streak: DecodeStreak | None = None) -> dict[str, ScheduledRequest] | None:
    """The step's chunks by request id, or None when the step is not steady decode or a block
    allocation fails (the general loop then does the step; the blocks allocated here are exactly
    the ones it would have allocated first, in the same order, so nothing needs undoing)."""
    if not running or len(running) > budget:
        return None
    if streak is not None and streak.num_running == len(running):
        allocate = kv.allocate_slots
        for req in streak.opening_block:
            if allocate(req, 1) is None:
                return None
        return {req.request_id: req.scheduled_view for req in running}
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
