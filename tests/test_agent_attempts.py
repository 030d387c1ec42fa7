"""Attempts that share one prefix: a job whose first attempt fails branches from its localization.

A scripted server plays the model: it reads the module (a call that changes nothing), then edits it,
wrongly when greedy and rightly when sampled hotter, then submits. The real runner, sandboxes and
judge run the job.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from agent_fakes import FakeServer, answer

from agent_engine.agent.attempts import SEED_STRIDE, AttemptPolicy, branch_prefix, merged
from agent_engine.agent.job_runner import AgentRunResult, RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig, AgentJobRecord, AgentJobResult
from agent_engine.agent.task_set import set_tasks
from agent_engine.agent.text_interface import SUBMIT_COMMAND

pytestmark = pytest.mark.core

TASK = next(t for t in set_tasks("builtin") if t.name == "add_operator")
WRONG, RIGHT = "sed -i 's/return a - b/return a * b/' calc.py", "sed -i 's/return a - b/return a + b/' calc.py"


class HotterFixes(FakeServer):
    """Step 1 edits wrongly at temperature 0 and rightly above it (``hot_fixes=False``: wrongly always)."""

    def __init__(self, hot_fixes: bool = True) -> None:
        super().__init__([answer("cat calc.py"), answer(WRONG), answer(SUBMIT_COMMAND)])
        self.hot_fixes = hot_fixes

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.content:
            payload: dict[str, Any] = json.loads(request.content)
            hot = (payload.get("temperature") or 0) > 0
            self.script[1] = answer(RIGHT if hot and self.hot_fixes else WRONG)
        return super().handle(request)


def _run(server: FakeServer, attempts: int) -> AgentRunResult:
    options = RunOptions("http://fake", AgentConfig(step_limit=4, max_tokens=32), concurrency=1,
                         command_timeout=20, progress=False, job_id_prefix="t-", transport=server.transport(),
                         attempts=AttemptPolicy(attempts))
    return run_agent_jobs_sync([TASK], options)


def test_a_failed_attempt_branches_from_its_reads_and_the_next_one_solves() -> None:
    server = HotterFixes()
    result = _run(server, attempts=3)
    job = result.results[0].job
    assert (job.solved, job.attempts) == (True, 2)
    assert (result.summary["solved"], result.summary["solved_first_attempt"], result.summary["attempts"]) == (1, 0, 2)
    bodies = server.chat_bodies()
    assert len(bodies) == 5  # attempt 1: read, wrong edit, submit; attempt 2: right edit, submit
    first, branched = bodies[1]["messages"], bodies[3]["messages"]
    assert branched == first  # attempt 2's first call sends exactly the prefix attempt 1 had before its edit
    assert bodies[3]["temperature"] > 0 and bodies[3]["seed"] == SEED_STRIDE + 1
    assert {b["job_id"] for b in bodies} == {"t-0"} and not any(b.get("is_last_step") for b in bodies)
    assert server.deletes() == ["/v1/jobs/t-0"]  # released once, after the attempt that solved it
    assert len(result.results[0].turns) == 5 and job.steps == 5


def test_attempts_stop_at_their_number_and_the_last_one_may_say_it_is_last() -> None:
    server = HotterFixes(hot_fixes=False)
    result = _run(server, attempts=2)
    job = result.results[0].job
    assert (job.solved, job.attempts) == (False, 2)
    assert server.deletes() == ["/v1/jobs/t-0"]


def test_one_attempt_is_the_plain_job() -> None:
    server = HotterFixes()
    result = _run(server, attempts=1)
    assert result.results[0].job.attempts == 1 and result.results[0].job.solved is False
    assert len(server.chat_bodies()) == 3


def test_the_policy_and_the_merge_keep_their_invariants() -> None:
    base = AgentConfig(seed=7)
    policy = AttemptPolicy(3, temperature=0.5)
    assert policy.config_for(base, 0) is base
    assert (policy.config_for(base, 2).temperature, policy.config_for(base, 2).seed) == (0.5, 7 + 2 * SEED_STRIDE)
    with pytest.raises(ValueError):
        AttemptPolicy(0)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"},
                {"role": "assistant", "content": "a"}, {"role": "user", "content": "o"}]
    one = AgentJobResult([], AgentJobRecord("j", "j", 0.0, start_at=1.0, end_at=5.0, steps=2, branch_at=None), messages)
    two = AgentJobResult([], AgentJobRecord("j", "j", 0.0, start_at=6.0, end_at=9.0, steps=3, solved=True), messages)
    assert branch_prefix(one) == messages
    one.job.branch_at = 0
    assert branch_prefix(one) == messages[:2]
    whole = merged([one, two], 1)
    assert (whole.job.attempts, whole.job.steps, whole.job.jct, whole.job.solved) == (2, 5, 8.0, True)
    with pytest.raises(ValueError):
        merged([one], 1)
