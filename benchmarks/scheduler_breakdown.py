"""Where ``Scheduler.update`` spends its time in steady decode: the real update against stripped loops.

One scheduler in steady decode; its steps take turns between the real ``update`` and loops that do
only part of its per-request work, each a superset of the one before:

* ``append``: append the sampled token to the request's two token lists, count it, emit a pair
  (the least any update that keeps per-request token lists must do);
* ``+ lookups``: find the request by id, check it still runs, advance its computed tokens, the
  prefix-cache block check, find its sampled token;
* ``+ stop rules``: first-token time and the stop test;
* ``+ output objects``: one ``EngineCoreOutput`` per request instead of one pair (what ``update``
  returned before its outputs became the ``StepOutputs`` columns);
* ``real update``: ``Scheduler.update`` (columns).

Printed by ``agent-engine bench scheduler --breakdown``: the median microseconds of each at the same
machine state (the variants alternate step by step). Its ``schedule`` row is mostly the checking
path: only the real update leaves the decode streak, so the main table's ``schedule`` column is the
one to quote. Invariant: no request finishes during the
timed steps, so every variant leaves the scheduler as the real update would for the fields the next
``schedule`` reads.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from scheduler.request import RequestStatus
from scheduler.step_io import NO_LOGPROBS, EngineCoreOutput

Update = Callable[[Any, Any, Any], list[Any]]


def _stripped(level: int) -> Update:
    """The update loop up to ``level`` (0: append, 1: + lookups, 2: + stop rules, 3: + output objects)."""
    running = RequestStatus.RUNNING

    def update(sched: Any, out: Any, result: Any) -> list[Any]:
        sampled, requests, outputs = result.sampled_token_ids, sched.requests, []
        caching, num_cached, bs = sched.kv.enable_caching, sched.kv.num_cached, sched.config.block_size
        for s in out.scheduled:
            rid = s.request_id
            if level >= 1:
                req = requests.get(rid)
                if req is None or req.status is not running:
                    continue
                n = len(s.token_ids)
                computed = req.num_computed_tokens = req.num_computed_tokens + n
                if caching and (n >= bs or computed % bs < n) and computed // bs > num_cached.get(rid, 0):
                    sched.kv.cache_computed_blocks(req)
                if not s.do_sample or (tok := sampled.get(rid)) is None:
                    continue
            else:
                req, tok = requests[rid], sampled[rid]
                req.num_computed_tokens += 1
            req.output_token_ids.append(tok)
            (all_ids := req.all_token_ids).append(tok)
            if (total := len(all_ids)) % bs == 0:
                req._extend_block_hashes()
            if level >= 2:
                if req.first_token_time is None:
                    req.first_token_time = 0.0
                if tok in req.stop_candidates or total >= req.length_limit:
                    req.stop_status(tok, sched.config.max_model_len)
            if level >= 3:
                lp, top = NO_LOGPROBS
                outputs.append(tuple.__new__(EngineCoreOutput, (rid, [tok], None, lp, top)))
            else:
                outputs.append((rid, tok))
        return outputs

    return update


VARIANTS: dict[str, Update] = {"append": _stripped(0), "+ lookups": _stripped(1), "+ stop rules": _stripped(2),
                               "+ output objects": _stripped(3), "real update": lambda sched, out, result: sched.update(out, result)}


def breakdown(sched: Any, clock: Any, runner: Any, steps: int) -> dict[str, float]:
    """Median microseconds per step of each variant (and of ``schedule``), the variants taking turns."""
    gc.collect()
    gc.freeze()
    times: dict[str, list[float]] = {name: [] for name in ("schedule", *VARIANTS)}
    names = list(VARIANTS)
    for i in range(steps * len(names)):
        name = names[i % len(names)]
        t0 = time.perf_counter()
        out = sched.schedule()
        t1 = time.perf_counter()
        result = runner.execute(out)
        t2 = time.perf_counter()
        VARIANTS[name](sched, out, result)
        times[name].append(time.perf_counter() - t2)
        times["schedule"].append(t1 - t0)
        clock.advance(0.01)
    gc.unfreeze()
    return {name: statistics.median(ts) * 1e6 for name, ts in times.items()}
