"""The bulk steady-decode path schedules exactly what the general loop would, step for step."""

from __future__ import annotations

import random

import pytest
from sched_helpers import make_request, make_scheduler

import scheduler.scheduler as scheduler_module
from scheduler import FakeRunner

pytestmark = pytest.mark.core

REAL_BULK_PATH = scheduler_module.schedule_steady_decode


def _trace(bulk: bool, monkeypatch: pytest.MonkeyPatch, seed: int) -> tuple[list[tuple], int, int]:
    """Every step's (id, position, tokens, block ids, do_sample) chunks on a pool tight enough to
    preempt, with staggered arrivals; how many steps the bulk path took, and how many of those on
    the streak ``update`` left (no per-request checks)."""
    taken = on_streak = 0

    def counting(*args):
        nonlocal taken, on_streak
        res = REAL_BULK_PATH(*args) if bulk else None
        taken += res is not None
        on_streak += res is not None and args[3] is not None
        return res

    monkeypatch.setattr(scheduler_module, "schedule_steady_decode", counting)
    rng = random.Random(seed)
    s = make_scheduler(num_blocks=9, block_size=4, max_model_len=24)
    arrivals = {step: [make_request(f"r{step}-{i}", [rng.randrange(5, 99) for _ in range(rng.randint(3, 9))],
                                    max_tokens=rng.randint(4, 14)) for i in range(rng.randint(1, 3))]
                for step in range(0, 40, 3)}
    runner, steps = FakeRunner(), []
    for step in range(400):
        for req in arrivals.get(step, []):
            s.add_request(req)
        if not s.has_unfinished_requests() and step > 40:
            break
        out = s.schedule()
        steps.append((sorted(out.preempted_req_ids), [(c.request_id, c.num_computed_tokens, list(c.token_ids),
                      list(c.block_ids), c.do_sample) for c in out.scheduled]))
        s.update(out, runner.execute(out))
    assert not s.has_unfinished_requests()
    return steps, taken, on_streak


@pytest.mark.parametrize("seed", range(6))
def test_bulk_decode_matches_the_general_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    general, none_taken, _ = _trace(False, monkeypatch, seed)
    bulk, taken, on_streak = _trace(True, monkeypatch, seed)
    assert none_taken == 0 and taken > 0  # the bulk path ran, and only in the second trace
    assert on_streak > 0  # some of it on the streak left by update
    assert bulk == general
    assert any(pre for pre, _ in general)  # the pool is tight enough to preempt


def test_step_outputs_read_as_a_sequence() -> None:
    """The columns ``update`` returns hand out per-request outputs by index, slice and iteration."""
    from scheduler import StepOutputs

    outs = StepOutputs(["a", "b"], [7, 9], {"b": "length"}, {"a": -0.5}, {})
    assert len(outs) == 2 and [o.request_id for o in outs] == ["a", "b"]
    assert outs[0].new_token_ids == [7] and list(outs[0].new_logprobs) == [-0.5] and not outs[0].finished
    assert outs[-1].finish_reason == "length" and [o.request_id for o in outs[1:]] == ["b"]
