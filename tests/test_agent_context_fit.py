"""An agent's conversation kept inside the model's context (``agent_engine.agent.context_fit``): nothing
changes while the prompt fits; past the budget the oldest observations are elided first (the system
prompt, the task and the last two observations never), each once, the conversation stays well formed;
and a live job against a server with a small context runs to its end instead of failing on
``context_length_exceeded``."""

from __future__ import annotations

import pytest
from agent_fakes import FakeServer, answer, run_jobs

from agent_engine.agent.context_fit import ELIDED, ContextFit, message_chars
from agent_engine.agent.job_runner import AgentTask
from agent_engine.agent.loop import AgentConfig

pytestmark = pytest.mark.core


def conversation(observations: int, chars: int) -> list[dict]:
    msgs = [{"role": "system", "content": "s" * 30}, {"role": "user", "content": "task " * 10}]
    for i in range(observations):
        msgs.append({"role": "assistant", "content": None,
                     "tool_calls": [{"id": f"c{i}", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": str(i) * chars})
    return msgs


def test_nothing_is_elided_while_the_prompt_fits() -> None:
    msgs = conversation(3, 100)
    before = [dict(m) for m in msgs]
    fit = ContextFit(context_tokens=2000, reserve_tokens=100)
    assert fit.fit(msgs) == 0 and msgs == before


def test_the_oldest_observations_go_first_and_the_last_two_stay() -> None:
    msgs = conversation(5, 900)  # about 1,500 tokens at 3 characters a token
    fit = ContextFit(context_tokens=1000, reserve_tokens=100)
    done = fit.fit(msgs)
    assert done == 3 and fit.elided == 3
    tools = [m for m in msgs if m["role"] == "tool"]
    assert [t["content"] for t in tools[:3]] == [ELIDED.format(chars=900)] * 3
    assert tools[3]["content"] == "3" * 900 and tools[4]["content"] == "4" * 900
    assert msgs[0]["content"] == "s" * 30 and msgs[1]["content"] == "task " * 10
    assert [m["role"] for m in msgs] == [m["role"] for m in conversation(5, 900)]
    assert [m.get("tool_call_id") for m in msgs] == [m.get("tool_call_id") for m in conversation(5, 900)]
    assert fit.fit(msgs) == 0  # nothing elided twice, the last two kept even over the budget


def test_the_estimate_learns_the_servers_count() -> None:
    msgs = conversation(2, 300)
    fit = ContextFit(context_tokens=4096, reserve_tokens=512)
    fit.observe(msgs, prompt_tokens=message_chars(msgs) // 2)  # two characters a token on this model
    assert abs(fit.estimate(msgs) - message_chars(msgs) / 2) <= 2


def test_a_config_with_no_room_for_a_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match="no room"):
        AgentConfig(context_tokens=300, max_tokens=256)


def test_a_job_against_a_small_context_runs_to_its_end() -> None:
    """1,200-character outputs, a 1,400-token context and 32-token answers: without elision the fifth
    prompt would be refused; with it the job makes all its calls."""
    noisy = [answer(f"python3 -c \"print('{c}' * 1200)\"") for c in "abcde"]
    server = FakeServer([*noisy, answer("echo done")], max_model_len=1400)
    result = run_jobs([AgentTask("print a lot", None)], server, step_limit=6)
    job = result.results[0].job
    assert job.error is None and job.steps == 6 and job.exit_status == "LimitsExceeded"
    assert job.elided >= 2
    last = server.chat_bodies()[-1]["messages"]
    assert sum(1 for m in last if str(m.get("content", "")).startswith("[earlier output elided")) == job.elided
