"""Repeated calls: detection, the note, the bounded temperature escalation and its seeds, and whole jobs.

The jobs are driven by in-process fake servers (``httpx.MockTransport``) that answer from a script,
as the small models did: the same failing ``edit_file`` again and again, the same failing command.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fakes import FakeServer, SequenceServer, ToolServer, tool_call

from agent_engine.agent.loop import MAX_DROPPED_REPEATS, AgentConfig, AgentJobResult, run_agent_job
from agent_engine.agent.repeats import Escalation, RepeatGuard, call_key, gist, tree_state
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import builtin_tasks
from agent_engine.agent.text_interface import SUBMIT_COMMAND

pytestmark = pytest.mark.core

EDIT = call_key("edit_file", {"path": "calc.py", "old_text": "a-b", "new_text": "a+b"})
CHECK = call_key("bash", {"command": "python3 check.py"})


# --------------------------------------------------------------------------- the guard alone


def test_escalation_steps_up_per_repeat_to_its_cap_and_never_below_the_base() -> None:
    e = Escalation(step=0.4, cap=1.2)
    assert [e.temperature(0.0, k) for k in range(5)] == pytest.approx([0.0, 0.4, 0.8, 1.2, 1.2])
    assert e.temperature(0.5, 1) == pytest.approx(0.9) and e.temperature(1.5, 3) == 1.5
    assert Escalation(step=0.0).temperature(0.2, 7) == 0.2
    with pytest.raises(ValueError, match=">= 0"):
        Escalation(step=-0.1)
    with pytest.raises(ValueError, match="window"):
        Escalation(window=0)


def test_a_repeat_of_the_previous_call_raises_the_next_temperature_with_a_seed_and_a_new_call_resets() -> None:
    guard = RepeatGuard(0.0, seed=100, state="s0")
    assert guard.sampling(0) == (0.0, None)
    assert guard.record(EDIT, True, 1, "old_text was not found in calc.py. Nothing changed.", "s0") is None
    assert guard.sampling(1) == (0.0, None)
    first = guard.record(EDIT, True, 1, "old_text was not found in calc.py. Nothing changed.", "s0")
    assert first is not None and first.calls_ago == 1 and first.failed and first.exit_code == 1
    assert "just before, and it failed then (exit code 1: old_text was not found in calc.py." in first.note()
    assert guard.sampling(2) == (pytest.approx(0.4), 102)
    assert guard.record(EDIT, True, 1, "old_text was not found", "s0") is not None
    assert guard.sampling(3) == (pytest.approx(0.8), 103)
    for _ in range(3):
        guard.record(EDIT, True, 1, "old_text was not found", "s0")
    assert guard.streak == 5 and guard.sampling(9) == (pytest.approx(1.2), 109)  # capped
    assert guard.record(CHECK, True, 1, "exit code 1\nFAIL", "s0") is None  # a new call: back to greedy
    assert guard.streak == 0 and guard.sampling(10) == (0.0, None)


def test_an_older_call_repeats_only_when_it_failed_on_the_same_repository() -> None:
    guard = RepeatGuard(state="s0")
    guard.record(CHECK, True, 1, "exit code 1\nFAIL add", "s0")
    guard.record(call_key("view_file", {"path": "calc.py"}), False, 0, "   1| def add", "s0")
    again = guard.record(CHECK, True, 1, "exit code 1\nFAIL add", "s0")  # nothing changed in between
    assert again is not None and again.calls_ago == 2 and "2 calls ago" in again.note()
    guard.record(EDIT, False, 0, "Edited calc.py.", "s1")  # an edit changed the repository ...
    assert guard.record(CHECK, False, 0, "exit code 0\nOK", "s1") is None  # ... so the check runs anew
    guard.record(call_key("view_file", {"path": "calc.py"}), False, 0, "...", "s1")
    assert guard.record(CHECK, False, 0, "exit code 0\nOK", "s1") is None  # an older success is no repeat
    guard.record(EDIT, False, 0, "Edited calc.py.", "s1")
    repeat = guard.record(EDIT, True, 1, "old_text was not found", "s1")
    assert repeat is not None and "succeeded then" in repeat.note()  # ... but the previous call is one


def test_an_immediate_repeat_counts_even_when_the_call_rewrote_a_file() -> None:
    loop = call_key("bash", {"command": "view_file . > output.txt && cat output.txt"})
    guard = RepeatGuard(state="s0")
    guard.record(loop, True, 127, "exit code 127\nbash: view_file: command not found", "s1")
    repeat = guard.record(loop, True, 127, "exit code 127\nbash: view_file: command not found", "s2")
    assert repeat is not None and "exit code 127: bash: view_file: command not found" in repeat.note()


def test_the_window_bounds_what_is_remembered() -> None:
    guard = RepeatGuard(escalation=Escalation(window=3), state="s")
    guard.record(CHECK, True, 1, "FAIL", "s")
    for i in range(3):
        guard.record(call_key("bash", {"command": f"ls {i}"}), False, 0, "", "s")
    assert guard.record(CHECK, True, 1, "FAIL", "s") is None


def test_gist_is_one_bounded_line() -> None:
    assert gist("exit code 1\nTraceback (most recent call last):\n  File x\nKeyError: 'timout'\n") == \
        "Traceback (most recent call last): ... KeyError: 'timout'"
    assert gist("exit code 0\n") == "" and len(gist("x" * 1000)) == 200


def test_tree_state_sees_content_and_new_files_not_reads_or_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    before = tree_state(tmp_path)
    (tmp_path / "a.py").read_text()
    (tmp_path / "a.py").write_text("x = 1\n")  # the same bytes again
    assert tree_state(tmp_path) == before
    (tmp_path / "a.py").write_text("x = 2\n")
    changed = tree_state(tmp_path)
    assert changed != before
    (tmp_path / "b").mkdir()
    assert tree_state(tmp_path) != changed
    assert tree_state(tmp_path, max_bytes=0) != before  # past the byte budget, times stand in for content


# --------------------------------------------------------------------------- whole jobs


def _tool_job(script: list[dict[str, Any]], config: AgentConfig,
              server_type: type[ToolServer] = ToolServer) -> tuple[AgentJobResult, ToolServer, int]:
    task = next(t for t in builtin_tasks() if t.name == "add_operator")
    server = server_type(script)

    async def go() -> tuple[AgentJobResult, int]:
        async with httpx.AsyncClient(base_url="http://fake", transport=httpx.MockTransport(server.handle)) as c:
            with Sandbox.create(task.repo, timeout=20, isolation="process") as sb:
                result = await run_agent_job(c, task.task, sb, "job-r", config, t0=0.0, check=task.check)
                return result, sb.run(task.check or "").exit_code

    result, check = asyncio.run(go())
    return result, server, check


def test_a_repeated_failing_edit_is_dropped_and_the_next_call_sampled_hotter_from_the_same_prompt() -> None:
    wrong = tool_call("edit_file", path="calc.py", old_text="return a-b", new_text="return a + b")
    right = tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    script = [tool_call("view_file", path="calc.py"), wrong, wrong, wrong, right]
    result, server, check = _tool_job(script, AgentConfig(step_limit=10, interface="tools", seed=7), SequenceServer)
    assert check == 0 and result.job.exit_status == "Submitted" and result.job.repeats == 2
    assert [b["temperature"] for b in server.bodies] == pytest.approx([0, 0, 0, 0.4, 0.8])
    assert [b.get("seed") for b in server.bodies] == [None, None, None, 10, 11]
    assert [t.repeat_of for t in result.turns] == [None, None, 1, 2, None]
    # The two repeats left nothing behind: calls 3 and 4 were asked exactly what call 2 was asked.
    assert server.bodies[2]["messages"] == server.bodies[3]["messages"] == server.bodies[4]["messages"]
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert len(tools) == 3 and not any("Repeated call" in t for t in tools)
    assert "Lines 6-6 of calc.py match old_text except for whitespace" in tools[1]
    assert "The check passes with this edit" in tools[2]  # the edit ran the check, which ended the job


def test_after_the_dropped_repeats_one_is_kept_with_its_note() -> None:
    wrong = tool_call("edit_file", path="calc.py", old_text="return a-b", new_text="return a + b")
    right = tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    script = [wrong] * (MAX_DROPPED_REPEATS + 2) + [right]
    result, server, check = _tool_job(script, AgentConfig(step_limit=10, interface="tools", seed=7), SequenceServer)
    assert check == 0 and result.job.repeats == MAX_DROPPED_REPEATS + 1
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert len(tools) == 3 and "Repeated call" not in tools[0]
    assert "Repeated call: you made this exact call (same tool and arguments) just before, and it failed then " \
           "(exit code 1: old_text was not found in calc.py. Nothing changed." in tools[1]


def test_a_repeat_escalation_of_zero_keeps_greedy_but_still_says_so() -> None:
    loop = tool_call("bash", command="view_file . > output.txt && cat output.txt")
    result, server, _ = _tool_job([loop], AgentConfig(step_limit=4, interface="tools", repeat_temperature_step=0))
    assert [b["temperature"] for b in server.bodies] == [0, 0, 0, 0] and all("seed" not in b for b in server.bodies)
    assert result.job.repeats == 3 and [t.repeat_of for t in result.turns] == [None, 0, 1, 2]
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "Repeated call" not in tools[0] and all("Repeated call" in t for t in tools[1:])


def test_a_text_job_that_loops_on_one_command_escalates_and_records_it(tmp_path: Path) -> None:
    server = FakeServer(["```bash\nnosuchtool --fix\n```"] * 4 + [f"```bash\n{SUBMIT_COMMAND}\n```"])
    config = AgentConfig(step_limit=6, max_tokens=16, temperature=0.1, seed=3,
                         repeat_temperature_step=0.5, repeat_temperature_cap=1.0)

    async def go() -> AgentJobResult:
        async with httpx.AsyncClient(base_url="http://fake", transport=server.transport()) as client:
            with Sandbox.create(str(tmp_path), timeout=10, isolation="process") as sb:
                return await run_agent_job(client, "fix it", sb, "job-t", config, t0=0.0)

    result = asyncio.run(go())
    bodies = server.chat_bodies()
    assert [b["temperature"] for b in bodies] == pytest.approx([0.1, 0.1, 0.6, 1.0, 1.0])
    assert [b["seed"] for b in bodies] == [3, 4, 5, 6, 7]  # a base temperature above 0 is seeded too
    assert [t.repeat_of for t in result.turns] == [None, 0, 1, 2, None] and result.job.repeats == 3
    observations = [m["content"] for m in result.messages if m["role"] == "user"][1:]
    assert "Repeated call" not in observations[0]
    assert all("failed then (exit code 127: " in o and "nosuchtool: command not found)" in o
               for o in observations[1:]), observations[1]


def test_the_config_refuses_bad_repeat_knobs() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        AgentConfig(repeat_temperature_step=-1)
    with pytest.raises(ValueError, match="temperature"):
        AgentConfig(temperature=-0.5)
    assert AgentConfig().escalation() == Escalation()


def test_the_cli_passes_the_repeat_knobs_to_the_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent_engine.cli.main import main as cli_main

    base = ["agent", "--base-url", "http://127.0.0.1:9", "--task", "x", "--out", str(tmp_path / "r.jsonl"),
            "--no-progress", "--seed", "5"]
    assert cli_main([*base, "--repeat-temperature-step", "-1"]) == 2
    assert "repeat temperature step and cap must be >= 0" in capsys.readouterr().err
    assert cli_main([*base, "--repeat-temperature-cap", "-0.5"]) == 2
    assert "must be >= 0, got 0.4, -0.5" in capsys.readouterr().err
