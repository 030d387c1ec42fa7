"""A model runner that computes nothing: it samples a deterministic token per request.

Plugs in where the torch runner does, so scheduler tests, the scheduler-overhead benchmark and the
simulator drive the real scheduler without a model.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.step_io import ModelRunnerOutput, ScheduledRequest, SchedulerOutput

TokenFn = Callable[[ScheduledRequest], int]


def _default_token(s: ScheduledRequest) -> int:
    # Depends only on the request's position, so a recomputed request samples the same tokens.
    return 1000 + (s.num_computed_tokens + s.num_scheduled_tokens) % 7


class FakeRunner:
    def __init__(self, token_fn: TokenFn = _default_token) -> None:
        self.token_fn = token_fn
        self.num_steps = 0

    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        self.num_steps += 1
        res = ModelRunnerOutput()
        for s in out.scheduled:
            if s.do_sample:
                res.sampled_token_ids[s.request_id] = self.token_fn(s)
        return res
