"""The tool-calling agent's interface: each tool in a real sandbox, bad calls, edits a small model can make
(line ranges, no broken syntax, no read-only check file, nothing from an answer cut at the token
limit), and whole jobs (the map in the task, the failing code after a failing check).

A fake OpenAI server (``httpx.MockTransport``) answers each step with a scripted tool call, streamed in
fragments as a real server streams ``delta.tool_calls``, so the loop's joining of fragments, its
``tool`` messages and its submission are checked end to end on a shipped task.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fakes import FakeServer, ToolServer, tool_call

from agent_engine.agent.aci import CUT_MESSAGE, TOOLS, Progress, run_tool_call
from agent_engine.agent.loop import AgentConfig, run_agent_job
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import builtin_tasks

pytestmark = pytest.mark.core

SOURCE = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    (tmp_path / "calc.py").write_text(SOURCE)
    with Sandbox.create(str(tmp_path), timeout=20, isolation="process") as sb:
        yield sb


def _file(sb: Sandbox) -> str:
    return sb.run("cat calc.py").output


def test_every_tool_is_a_strict_function_with_required_strings() -> None:
    assert [t["function"]["name"] for t in TOOLS] == ["bash", "view_file", "search", "replace_lines", "edit_file", "submit"]
    for t in TOOLS:
        params = t["function"]["parameters"]
        assert params["additionalProperties"] is False and set(params["required"]) == set(params["properties"])


def test_view_numbers_lines_and_lists_folders(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("view_file", path="calc.py"))
    assert out.exit_code == 0 and "   2|     return a - b" in out.observation
    assert "calc.py" in run_tool_call(sandbox, tool_call("view_file", path=".")).observation
    missing = run_tool_call(sandbox, tool_call("view_file", path="nope.py"))
    assert missing.exit_code == 1 and "No file 'nope.py'" in missing.observation and "calc.py" in missing.observation


def test_edit_replaces_once_and_shows_the_changed_lines(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"))
    assert out.exit_code == 0 and out.observation.startswith("Edited calc.py.")
    assert "   2|     return a + b" in out.observation
    assert _file(sandbox) == SOURCE.replace("a - b", "a + b")


def test_edit_tolerates_indentation_and_reindents(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="return a - b\n",
                                       new_text="return a + b\n"))
    assert out.exit_code == 0
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="def double(x):\nreturn add(x, x)",
                                       new_text="def double(x):\n    return 2 * x"))
    assert out.exit_code == 0, out.observation
    assert _file(sandbox).endswith("def double(x):\n    return 2 * x\n")


@pytest.mark.parametrize(("old", "why"), [("return a * b", "was not found"), ("return", "occurs 2 times"),
                                          ("   ", "was not found"), ("import numpy as np", "No lines of calc.py")])
def test_a_failed_edit_changes_nothing_and_says_why(sandbox: Sandbox, old: str, why: str) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text=old, new_text="x"))
    assert out.exit_code == 1 and why in out.observation and "Nothing changed" in out.observation
    assert _file(sandbox) == SOURCE


def test_a_failed_edit_shows_the_closest_lines_with_their_numbers(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="def add(a, b):\n    return a + b",
                                       new_text="x"))
    assert out.exit_code == 1 and "old_text was not found in calc.py. Nothing changed." in out.observation
    assert "The closest lines of calc.py are 1-2" in out.observation
    assert "   1| def add(a, b):\n   2|     return a - b\n   3| " in out.observation  # the window and its context
    assert _file(sandbox) == SOURCE


def test_old_text_that_skips_a_docstring_is_applied_as_a_line_diff(tmp_path: Path) -> None:
    source = 'def add(a, b):\n    """The sum."""\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n'
    (tmp_path / "calc.py").write_text(source)
    with Sandbox.create(str(tmp_path), timeout=20, isolation="process") as sb:
        out = run_tool_call(sb, tool_call("edit_file", path="calc.py", old_text="def add(a, b):\n    return a - b\n",
                                          new_text="def add(a, b):\n    # fixed\n    return a + b\n"))
        assert out.exit_code == 0 and "did not match exactly" in out.observation, out.observation
        assert _file(sb) == source.replace("    return a - b\n", "    # fixed\n    return a + b\n")
        # a changed run of lines that are not adjacent in the file: too uncertain, nothing written
        again = run_tool_call(sb, tool_call("edit_file", path="calc.py", old_text="def add(a, b):\n    return a + b",
                                            new_text="def plus(a, b):\n    return a * b"))
        assert again.exit_code == 1 and "Nothing changed" in again.observation
        assert "# fixed" in _file(sb) and "def add(a, b):" in _file(sb)


def test_a_whitespace_near_miss_is_named_and_shown(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="return a-b", new_text="return a + b"))
    assert out.exit_code == 1 and "Lines 2-2 of calc.py match old_text except for whitespace" in out.observation
    assert "   2|     return a - b" in out.observation
    literal = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="def double(x):\\n    return add(x,x)",
                                           new_text="x"))
    assert "Lines 5-6 of calc.py match old_text except for whitespace" in literal.observation
    assert _file(sandbox) == SOURCE


def test_repeated_old_text_names_the_lines_it_occurs_at(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="return", new_text="x"))
    assert "occurs 2 times in calc.py (at lines 2, 6)" in out.observation


def test_a_failed_edit_of_a_huge_file_stays_bounded(tmp_path: Path) -> None:
    lines = [f"value_{i} = compute({i}, {i * 7 % 13}, 'label number {i}')" + " # pad" * 30 for i in range(3000)]
    (tmp_path / "big.py").write_text("\n".join(lines) + "\n")
    wanted = "\n".join(line.replace("compute", "compte") for line in lines[1500:1540])  # 40 lines, one typo each
    with Sandbox.create(str(tmp_path), timeout=60, isolation="process") as sb:
        out = run_tool_call(sb, tool_call("edit_file", path="big.py", old_text=wanted, new_text="x"))
    assert out.exit_code == 1 and "The closest lines of big.py are 1501-1540" in out.observation
    assert "1501| value_1500 = compute(" in out.observation and "more lines)" in out.observation
    assert len(out.observation) < 3000 and max(len(x) for x in out.observation.splitlines()) <= 170


def test_a_read_only_file_is_not_edited_and_the_model_is_told(sandbox: Sandbox) -> None:
    assert sandbox.run("chmod a-w calc.py").exit_code == 0
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"))
    assert out.exit_code == 1 and "calc.py is read-only" in out.observation and "nothing changed" in out.observation
    assert _file(sandbox) == SOURCE


@pytest.mark.parametrize(("call", "says"), [
    ({"function": {"name": "rm_rf", "arguments": "{}"}}, "There is no tool 'rm_rf'"),
    ({"function": {"name": "bash", "arguments": "1}"}}, "must be a JSON object"),
    ({"function": {"name": "bash", "arguments": "[]"}}, "must be a JSON object"),
    ({"function": {"name": "edit_file", "arguments": '{"path": "calc.py"}'}}, "old_text, new_text"),
])
def test_bad_calls_are_format_errors_not_crashes(sandbox: Sandbox, call: dict[str, Any], says: str) -> None:
    out = run_tool_call(sandbox, call)
    assert out.format_error and says in out.observation and not out.submitted
    assert _file(sandbox) == SOURCE


def test_bash_and_submit(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("bash", command="python3 -c 'import calc; print(calc.add(2, 3))'"))
    assert out.observation == "exit code 0\n-1" and out.tool_name == "bash"
    assert run_tool_call(sandbox, tool_call("submit")).submitted


def test_a_tool_typed_as_a_shell_command_runs_that_tool(sandbox: Sandbox) -> None:
    view = run_tool_call(sandbox, tool_call("bash", command="view_file calc.py"))
    assert view.tool_name == "view_file" and "   2|     return a - b" in view.observation
    edit = run_tool_call(sandbox, tool_call("bash", command="edit_file calc.py 'return a - b' 'return a + b'"))
    assert edit.tool_name == "edit_file" and "return a + b" in _file(sandbox)
    assert run_tool_call(sandbox, tool_call("bash", command="submit")).submitted
    # Any other shape stays a shell command: a tool name with the wrong number of words is bash's.
    wrong = run_tool_call(sandbox, tool_call("bash", command="view_file calc.py extra"))
    assert wrong.tool_name == "bash" and wrong.exit_code != 0


def test_editing_a_folder_changes_nothing(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path=".", old_text="a", new_text="b"))
    assert out.exit_code == 1 and "is a folder" in out.observation and _file(sandbox) == SOURCE


def test_old_text_copied_with_line_numbers_still_edits(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="   2|     return a - b",
                                       new_text="    return a + b"))
    assert out.exit_code == 0 and "return a + b" in _file(sandbox)


def test_advice_follows_what_the_job_did(sandbox: Sandbox) -> None:
    progress = Progress(check="python3 -c 'import calc; assert calc.add(2, 3) == 5'")
    check = tool_call("bash", command=progress.check)

    def advise(call: dict[str, Any], repeated: bool = False) -> str:
        return progress.advice(run_tool_call(sandbox, call), repeated)

    assert "view_file" in advise(check)  # failing, nothing seen yet
    assert "edit_file" in advise(tool_call("view_file", path="calc.py"))
    assert "edit_file" in advise(check, repeated=True)  # a repeat is told the step it skipped
    assert "run the check" in advise(tool_call("edit_file", path="calc.py", old_text="return a - b",
                                            new_text="return a + b"))
    assert advise(check) == "The check passes. Next: call submit."
    assert advise(tool_call("submit")) == "" and advise(tool_call("nope")) == ""


def test_advice_sends_the_model_to_the_code_a_failing_check_names(tmp_path: Path) -> None:
    (tmp_path / "temps.py").write_text("def to_f(c):\n    return c * 9 / 5 + 23\n")
    (tmp_path / "check.py").write_text("import sys, temps\nprint(f'FAIL temps.to_f(0) = {temps.to_f(0)}')\n"
                                       "sys.exit(temps.to_f(0) != 32)\n")
    progress = Progress(check="python3 check.py")
    with Sandbox.create(str(tmp_path), timeout=20, isolation="process") as sb:
        def advise(call: dict[str, Any]) -> str:
            return progress.advice(run_tool_call(sb, call))

        assert advise(tool_call("bash", command="python3 check.py")).startswith("Next: view_file the file")
        assert advise(tool_call("view_file", path="check.py")).startswith("Next: view_file temps.py:")  # not the check
        assert "edit_file" in advise(tool_call("view_file", path="temps.py"))
    assert progress.suspects == ["temps.py"]


# --------------------------------------------------------------------------- a whole job


def test_a_tool_calling_job_solves_a_shipped_task() -> None:
    task = next(t for t in builtin_tasks() if t.name == "add_operator")
    server = ToolServer([tool_call("view_file", path="calc.py"), {"function": {"name": "bash", "arguments": "oops"}},
                         tool_call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"),
                         tool_call("bash", command="python3 check.py"), tool_call("submit")])

    async def go() -> Any:
        async with httpx.AsyncClient(base_url="http://fake", transport=httpx.MockTransport(server.handle)) as c:
            with Sandbox.create(task.repo, timeout=20, isolation="process") as sb:
                result = await run_agent_job(c, task.task, sb, "job-1", AgentConfig(step_limit=8, interface="tools"),
                                             t0=0.0)
                return result, sb.run(task.check or "").exit_code

    result, check = asyncio.run(go())
    assert check == 0 and result.job.exit_status == "Submitted" and result.job.steps == 5
    assert result.job.format_errors == 1
    assert server.bodies[0]["tool_choice"] == "required" and server.bodies[0]["tools"] == TOOLS
    tool_msgs = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_0", "call_1", "call_2", "call_3"]
    assert "must be a JSON object" in tool_msgs[1]["content"] and "exit code 0\nOK" in tool_msgs[3]["content"]
    assert [t.tool_name for t in result.turns] == ["view_file", None, "edit_file", "bash:python", "submit"]


def test_a_missing_path_names_the_files_of_its_folder_and_the_closest(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong guess inside a package (``exprcalc/exprcalc.py`` where ``exprcalc/parser.py`` is) shows the
    package's files and the closest paths, not only the top folder."""
    from agent_engine.agent import file_view

    for name in ("exprcalc/__init__.py", "exprcalc/parser.py", "exprcalc/evaluator.py", "tests/test_parser.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    text = file_view.missing("exprcalc/parsers.py")
    assert text.startswith("No file 'exprcalc/parsers.py'. Nothing changed.")
    assert "Did you mean: exprcalc/parser.py" in text
    assert "Files in exprcalc: exprcalc/__init__.py, exprcalc/evaluator.py, exprcalc/parser.py" in text
    assert "Files in .: " in file_view.missing("nowhere/deep/x.py")


# --------------------------------------------------------------------------- edits a small model can make


def test_replace_lines_replaces_inserts_and_reindents(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=2, end_line=2,
                                           new_text="return a + b"))  # indentation left out
    assert out.exit_code == 0 and out.observation.startswith("Replaced lines 2-2 of calc.py by 1 line(s).")
    assert "(new_text was re-indented by 4 to match the lines it replaces.)" in out.observation
    assert _file(sandbox) == SOURCE.replace("a - b", "a + b")
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line="2", end_line="1",
                                           new_text='    """The sum."""\n'))
    assert out.observation.startswith("Inserted before line 2 of calc.py by 1 line(s).")
    assert "(Lines after 2 moved by +1: line numbers from earlier views are stale.)" in out.observation
    assert _file(sandbox).startswith('def add(a, b):\n    """The sum."""\n    return a + b\n')
    numbered = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=7, end_line=7,
                                                new_text="   7|     return 2 * x"))  # copied from a view
    assert numbered.exit_code == 0 and _file(sandbox).endswith("def double(x):\n    return 2 * x\n")


def test_replace_lines_outside_the_file_changes_nothing(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=40, end_line=41, new_text="x"))
    assert out.exit_code == 1 and "Lines 40-41 are not lines of calc.py: its lines are 1-6." in out.observation
    missing = run_tool_call(sandbox, {"function": {"name": "replace_lines",
                                                   "arguments": '{"path": "calc.py", "new_text": "x"}'}})
    assert missing.format_error and "start_line, end_line" in missing.observation
    assert _file(sandbox) == SOURCE


def test_a_range_wider_than_the_lines_new_text_rewrites_replaces_only_those(sandbox: Sandbox) -> None:
    """The model viewed lines 1-5 and replaced them all by the one line it meant to fix."""
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=1, end_line=5,
                                           new_text="return a + b"))
    assert out.exit_code == 0 and "new_text rewrites line(s) 2, so only those were replaced" in out.observation
    assert _file(sandbox) == SOURCE.replace("a - b", "a + b")
    unlike = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=1, end_line=5,
                                              new_text="print('hello')"))  # rewrites none of them: refused
    assert unlike.exit_code == 1 and "would break calc.py's syntax" in unlike.observation


def test_a_one_line_edit_naming_the_wrong_line_lands_on_the_line_it_rewrites(sandbox: Sandbox) -> None:
    """The model meant line 2 (``return a - b``) but named line 1, the ``def``: replacing the ``def`` would
    break the file, and the new line rewrites line 2 alone, so line 2 is replaced."""
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=1, end_line=1,
                                           new_text="return a + b"))
    assert out.exit_code == 0 and "new_text rewrites line 2 nearby, so line 2 was replaced instead" in out.observation
    assert _file(sandbox) == SOURCE.replace("a - b", "a + b")
    unlike = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=1, end_line=1,
                                              new_text="print('hello')"))  # rewrites no line near: refused
    assert unlike.exit_code == 1 and "would break calc.py's syntax" in unlike.observation


def test_an_edit_that_breaks_the_syntax_is_refused(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("replace_lines", path="calc.py", start_line=2, end_line=2,
                                           new_text="    return (a + b"))
    assert out.exit_code == 1 and "Nothing changed: the edit would break calc.py's syntax" in out.observation
    assert "   2|     return (a + b" in out.observation
    edit = run_tool_call(sandbox, tool_call("edit_file", path="calc.py", old_text="def double(x):",
                                            new_text="def double(x)"))
    assert edit.exit_code == 1 and "would break calc.py's syntax" in edit.observation
    assert _file(sandbox) == SOURCE


def test_a_read_only_check_file_points_to_the_librarys_code(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "core.py").write_text("X = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text("X = 1\n")
    (tmp_path / "tests" / "test_core.py").chmod(0o444)
    with Sandbox.create(str(tmp_path), timeout=20, isolation="process") as sb:
        for call in (tool_call("edit_file", path="tests/test_core.py", old_text="X = 1", new_text="X = 2"),
                     tool_call("replace_lines", path="tests/test_core.py", start_line=1, end_line=1, new_text="X = 2")):
            out = run_tool_call(sb, call)
            assert out.exit_code == 1 and out.observation.startswith(
                "tests/test_core.py is read-only: it is part of the task's check, so nothing changed. Fix the "
                "library's code instead: pkg/core.py (view_file . shows each module's classes and functions).")
        assert sb.run("cat tests/test_core.py").output == "X = 1\n"


def test_an_answer_cut_at_the_token_limit_changes_nothing(sandbox: Sandbox) -> None:
    for call in (tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b"),
                 tool_call("replace_lines", path="calc.py", start_line=2, end_line=2, new_text="    return a + b"),
                 tool_call("bash", command="echo x > calc.py"),
                 {"function": {"name": "edit_file", "arguments": '{"path": "calc.py", "old_text": "ret'}}):
        out = run_tool_call(sandbox, call, cut=True)
        assert out.cut and out.exit_code == 1 and out.observation == CUT_MESSAGE and not out.format_error
    assert _file(sandbox) == SOURCE
    view = run_tool_call(sandbox, tool_call("view_file", path="calc.py", start_line=1, end_line=2), cut=True)
    assert not view.cut and "   2|     return a - b" in view.observation  # a whole read-only call still runs


class CutServer(ToolServer):
    """A ``ToolServer`` whose answers at the given steps end for length (``finish_reason`` "length")."""

    def __init__(self, script: list[dict[str, Any]], cut_steps: set[int]) -> None:
        super().__init__(script)
        self.cut_steps = cut_steps

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = super().handle(request)
        if request.method == "POST":
            step = sum(1 for m in json.loads(request.content)["messages"] if m["role"] == "assistant")
            if step in self.cut_steps:
                return httpx.Response(200, text=response.text.replace('"tool_calls"}', '"length"}'),
                                      headers=response.headers)
        return response


def _job(server: Any, repo: str, config: AgentConfig, check: str | None = None) -> tuple[Any, str]:
    async def go() -> tuple[Any, str]:
        async with httpx.AsyncClient(base_url="http://fake", transport=httpx.MockTransport(server.handle)) as c:
            with Sandbox.create(repo, timeout=30, isolation="process") as sb:
                result = await run_agent_job(c, "Fix calc.", sb, "job-1", config, t0=0.0, check=check)
                return result, sb.run("cat calc.py").output

    return asyncio.run(go())


def test_a_job_refuses_the_edit_of_a_cut_answer_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(SOURCE)
    edit = tool_call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    server = CutServer([edit, edit, tool_call("submit")], cut_steps={0})
    result, source = _job(server, str(tmp_path), AgentConfig(step_limit=4, interface="tools"))
    tools = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert tools[0] == CUT_MESSAGE and tools[1].startswith("Edited calc.py.")
    assert result.job.cut_answers == 1 and result.turns[0].finish_reason == "length"
    assert source == SOURCE.replace("a - b", "a + b")


def test_a_job_opens_with_the_repository_map_and_shows_the_failing_code(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(SOURCE)
    (tmp_path / "check.py").write_text("import calc\nassert calc.double(2) == 4, calc.double(2)\n")
    check = "python3 check.py"
    server = ToolServer([tool_call("bash", command=check), tool_call("submit")])
    result, _ = _job(server, str(tmp_path), AgentConfig(step_limit=3, interface="tools"), check=check)
    task = result.messages[1]["content"]
    assert task.startswith("Task: Fix calc.\n\nThe repository's files") and "    1 def add\n    5 def double" in task
    observation = [m["content"] for m in result.messages if m["role"] == "tool"][0]
    assert "The library code on the failing path" not in observation  # the assertion is the check's own line
    assert "The failing tests call this library code" in observation
    assert "calc.py, def double (lines 5-6), called by check.py:2:" in observation
    assert "calc.py, def add (lines 1-2), called by double:\n   1| def add(a, b):\n   2|     return a - b" in observation
    assert observation.endswith("Next: fix the library code shown above (replace_lines with its line numbers, or "
                                "edit_file); view_file shows more lines.")
    bare, _ = _job(ToolServer([tool_call("submit")]), str(tmp_path),
                   AgentConfig(step_limit=1, interface="tools", aids=False))
    assert bare.messages[1]["content"] == "Task: Fix calc."


def test_the_text_interface_runs_tool_commands_and_names_a_cut_answer(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(SOURCE)
    script = ["```bash\nview_file calc.py 2 2\n```", "```bash\nreplace_lines calc.py 2 2 'return a + b'\n```",
              "```bash\ncat > calc.py <<EOF\nhalf of a fi", "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"]
    server = FakeServer(script)
    original = server.handle

    def handle(request: httpx.Request) -> httpx.Response:
        response = original(request)
        if request.method == "POST" and sum(m["role"] == "assistant" for m in json.loads(request.content)["messages"]) == 2:
            return httpx.Response(200, text=response.text.replace('"stop"', '"length"'), headers=response.headers)
        return response

    server.handle = handle  # type: ignore[method-assign]
    result, source = _job(server, str(tmp_path), AgentConfig(step_limit=5, interface="text", aids=True))
    users = [m["content"] for m in result.messages if m["role"] == "user"]
    assert "view_file PATH START END" in result.messages[0]["content"]  # the prompt names the commands
    assert "calc.py, lines 2-2 of 6:\n   2|     return a - b" in users[1]
    assert users[2].startswith("<returncode>0</returncode>") and "Replaced lines 2-2 of calc.py" in users[2]
    assert users[3].startswith("Your answer was cut at the token limit")
    assert result.job.exit_status == "Submitted" and source == SOURCE.replace("a - b", "a + b")
