"""Edits checked by the task's check: worse is undone in the sandbox, passing ends the job; the opening
run puts the failing output in the task message. Scores are read from real runners' output."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fakes import SequenceServer, ToolServer, tool_call

from agent_engine.agent.check_score import CheckScore, ran_count, score
from agent_engine.agent.checked_edits import OPENING_HEADING, OPENING_NEXT
from agent_engine.agent.loop import (
    MAX_DROPPED_EDITS,
    RESAMPLE_TEMPERATURE,
    AgentConfig,
    AgentJobResult,
    run_agent_job,
)
from agent_engine.agent.sandbox import Sandbox

pytestmark = pytest.mark.core

SOURCE = '''def add(a, b):
    """Sum of a and b."""
    return a - b


def double(a):
    return add(a, a)
'''
CHECK_SOURCE = '''import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_double(self):
        self.assertEqual(calc.double(2), 4)

    def test_double_zero(self):
        self.assertEqual(calc.double(0), 0)


if __name__ == "__main__":
    unittest.main()
'''
CHECK = "python3 test_calc.py"


def _job(tmp_path: Path, script: list[dict[str, Any]], steps: int = 6,
         server_type: type[ToolServer] = ToolServer) -> tuple[AgentJobResult, ToolServer, str]:
    (tmp_path / "calc.py").write_text(SOURCE)
    (tmp_path / "test_calc.py").write_text(CHECK_SOURCE)
    server = server_type(script)

    async def go() -> tuple[AgentJobResult, str]:
        async with httpx.AsyncClient(base_url="http://fake", transport=httpx.MockTransport(server.handle)) as c:
            with Sandbox.create(str(tmp_path), timeout=30, isolation="process") as sb:
                result = await run_agent_job(c, "add subtracts.", sb, "job-c", AgentConfig(
                    step_limit=steps, interface="tools"), t0=0.0, check=CHECK)
                return result, sb.run("cat calc.py").output

    result, source = asyncio.run(go())
    return result, server, source


def test_the_task_message_opens_with_the_checks_failing_output_and_code(tmp_path: Path) -> None:
    result, server, _ = _job(tmp_path, [tool_call("submit")], steps=1)
    task = server.bodies[0]["messages"][1]["content"]
    assert OPENING_HEADING in task and "exit code 1" in task
    assert "test_add" in task and "calc.py" in task and "return a - b" in task  # the failing code, numbered
    assert "Each edit runs the check" in server.bodies[0]["messages"][0]["content"]
    assert task.endswith(OPENING_NEXT)  # code was shown: the advice points at it


def test_an_edit_that_makes_the_check_worse_is_undone_in_the_sandbox(tmp_path: Path) -> None:
    breaking = tool_call("replace_lines", path="calc.py", start_line=6, end_line=7, new_text="def double(a):\n    return 1")
    result, _, source = _job(tmp_path, [breaking, tool_call("submit")])
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "The check got worse with this edit (2 failing tests before, 3 failing tests with it)" in tools[0]
    assert "the edit was undone" in tools[0] and "calc.py is back as it was before the edit" in tools[0]
    assert source == SOURCE  # the sandbox's file as it was
    assert result.turns[0].exit_code == 1  # counted as a failed call


def test_an_undone_edit_leaves_no_trace_and_the_next_edit_is_sampled_hotter(tmp_path: Path) -> None:
    breaking = tool_call("replace_lines", path="calc.py", start_line=6, end_line=7, new_text="def double(a):\n    return 1")
    fix = tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    result, server, source = _job(tmp_path, [breaking, fix], server_type=SequenceServer)
    assert result.job.exit_status == "Submitted" and source == SOURCE.replace("a - b", "a + b")
    assert server.bodies[0]["messages"] == server.bodies[1]["messages"]  # the undone edit was dropped
    assert server.bodies[0]["temperature"] == 0 and server.bodies[1]["temperature"] == RESAMPLE_TEMPERATURE
    assert server.bodies[1]["seed"] == 1
    assert [t.exit_code for t in result.turns] == [1, 0]


def test_past_the_dropped_edits_one_is_kept_with_its_message(tmp_path: Path) -> None:
    breaking = tool_call("replace_lines", path="calc.py", start_line=6, end_line=7, new_text="def double(a):\n    return 1")
    result, server, _ = _job(tmp_path, [breaking] * (MAX_DROPPED_EDITS + 1) + [tool_call("submit")] * 3,
                             steps=MAX_DROPPED_EDITS + 2, server_type=SequenceServer)
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "got worse with this edit" in tools[0] and len(server.bodies) == MAX_DROPPED_EDITS + 2


def test_an_edit_that_makes_the_check_pass_ends_the_job(tmp_path: Path) -> None:
    fix = tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    result, server, source = _job(tmp_path, [fix, tool_call("bash", command="echo never")])
    assert result.job.exit_status == "Submitted" and len(server.bodies) == 1
    assert "The check passes with this edit" in result.messages[-1]["content"]
    assert source == SOURCE.replace("a - b", "a + b")


def test_an_edit_that_leaves_the_check_failing_is_kept_with_the_checks_output(tmp_path: Path) -> None:
    half = tool_call("edit_file", path="calc.py", old_text="return add(a, a)", new_text="return 2 * a")
    result, _, source = _job(tmp_path, [half, tool_call("submit")])
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "The check after this edit (`python3 test_calc.py`) still fails: exit code 1 (1 failing test; 2 failing " \
           "tests before):" in tools[0]
    assert "return 2 * a" in source


UNITTEST_FAIL = "F.E\n" + "=" * 70 + "\nFAIL: test_a (t.T)\n" + "-" * 70 + "\nRan 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n"
RUNNER = "could not import tests/test_x.py: ImportError: no\n12 tests: 1 error, 2 failed, 9 passed\n"
PYTEST = "FAILED t.py::test_a - assert 1\n==== 3 failed, 10 passed in 0.12s ====\n"
CRASH = "Traceback (most recent call last):\n  File \"calc.py\", line 3\nSyntaxError: invalid syntax\n"


def test_scores_read_from_the_runners_own_summaries() -> None:
    assert score(0, "anything") == CheckScore(True, 0)
    assert score(1, UNITTEST_FAIL) == CheckScore(False, 2)
    assert score(1, RUNNER) == CheckScore(False, 3, broken=1)
    assert score(1, PYTEST) == CheckScore(False, 3)
    assert score(1, CRASH) == CheckScore(False, None, broken=1)
    assert score(1, "expected 4, got 0") == CheckScore(False, None)
    assert score(1, "FAIL f(1) = 2, expected 1\nFAIL g(0) = 3\n") == CheckScore(False, 2)


def test_the_tests_a_run_says_it_ran() -> None:
    assert (ran_count(UNITTEST_FAIL), ran_count(RUNNER)) == (3, 12)
    assert ran_count("Ran 476 tests in 0.5s\n\nFAILED (failures=1)\n476 tests: 1 failed, 475 passed\n") == 476
    assert ran_count(PYTEST) is None and ran_count(CRASH) is None


def test_worse_only_on_evidence() -> None:
    two, three = CheckScore(False, 2), CheckScore(False, 3)
    assert three.worse_than(two) and not two.worse_than(three) and not two.worse_than(two)
    assert CheckScore(False, 1, broken=1).worse_than(two)  # a test file stopped importing
    assert CheckScore(False, None, broken=1).worse_than(two)  # the run crashed
    assert two.worse_than(CheckScore(True, 0)) and not CheckScore(True, 0).worse_than(three)
    assert not CheckScore(False, None).worse_than(CheckScore(False, None))  # nothing countable: keep the edit
    assert not CheckScore(False, None).countable and CheckScore(False, 0, broken=1).countable


def test_a_submit_while_the_check_fails_is_refused_with_the_reason_then_let_through(tmp_path: Path) -> None:
    result, server, _ = _job(tmp_path, [tool_call("submit")] * 4)
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    # The second refusal repeats the first on an unchanged repository: dropped from the conversation.
    assert len(tools) == 1 and tools[0].startswith("Not submitted: the check still fails (2 failing tests)")
    assert result.job.exit_status == "Submitted" and len(server.bodies) == 3


def test_an_edit_that_changes_nothing_fails_and_runs_no_check(tmp_path: Path) -> None:
    same = tool_call("replace_lines", path="calc.py", start_line=3, end_line=3, new_text="    return a - b")
    result, _, source = _job(tmp_path, [same, tool_call("submit")])
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert tools[0].startswith("Nothing changed: calc.py already reads so") and "The check" not in tools[0]
    assert result.turns[0].exit_code == 1 and source == SOURCE
