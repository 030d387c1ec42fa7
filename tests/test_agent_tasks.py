"""The shipped agent task set, the runner's checks (``solved``), and the agent's hint styles.

A fake OpenAI server (``httpx.MockTransport``, in process) plays the model: it answers each step from
a script, so a job can really apply a task's known fix in its sandbox (solved) or give up (not solved),
and every request the agent sends is kept to check which hint fields it carried.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from agent_fakes import FakeServer, answer, run_jobs

from agent_engine.agent.loop import AgentConfig, run_agent_job
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import (
    TASKS_DIR,
    AgentTask,
    builtin_solutions,
    builtin_tasks,
    load_tasks,
    read_task_lines,
    resolve_tasks,
)
from agent_engine.agent.text_interface import SUBMIT_COMMAND
from agent_engine.cli.main import main as cli_main
from agent_engine.workloads.hint_styles import HINT_STYLES

pytestmark = pytest.mark.core

TASKS = builtin_tasks()
HINT_KEYS = {"job_id", "session_id", "is_last_step", "tool_name", "prompt_cache_key", "metadata"}


def _bash(command: str, cwd: Path) -> int:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, timeout=30).returncode


# --------------------------------------------------------------------------- the shipped task set


def test_builtin_set_is_complete() -> None:
    names = [t.name for t in TASKS]
    assert len(TASKS) >= 20 and len(set(names)) == len(names)
    lines = {d["name"]: d for d in read_task_lines(TASKS_DIR / "tasks.jsonl")}
    kinds = {d["kind"] for d in lines.values()}
    assert kinds == {"one-line bug", "failing test output", "two files", "missing function", "config error"}
    assert {d["difficulty"] for d in lines.values()} == {"easy", "medium", "hard"}
    solutions = builtin_solutions()
    assert set(solutions) == set(names)
    for t in TASKS:
        assert t.check == "python3 check.py" and t.repo is not None and t.job_id is None
        assert Path(t.repo).is_dir() and Path(t.repo).parent == TASKS_DIR
        assert (Path(t.repo) / "check.py").is_file() and "check.py" in t.task


@pytest.mark.parametrize("task", TASKS, ids=[t.name or "" for t in TASKS])
def test_check_fails_as_shipped_and_passes_after_the_known_fix(task: AgentTask, tmp_path: Path) -> None:
    assert task.repo is not None and task.check is not None and task.name is not None
    repo = Path(shutil.copytree(task.repo, tmp_path / "repo"))
    before = {p.name: p.read_text() for p in repo.iterdir() if p.is_file()}
    assert _bash(task.check, repo) != 0, "the shipped repo already passes its check"
    assert _bash(builtin_solutions()[task.name], repo) == 0
    changed = sorted(n for n, text in before.items() if (repo / n).read_text() != text)
    two_files = read_task_lines(TASKS_DIR / "tasks.jsonl")[[t.name for t in TASKS].index(task.name)]["kind"] == "two files"
    assert len(changed) == (2 if two_files else 1) and "check.py" not in changed, changed  # the code, not the check
    assert _bash(task.check, repo) == 0, "the known fix does not pass the check"


def test_load_tasks_reads_checks_and_rejects_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "tasks.jsonl"
    good.write_text('{"task": "t1", "check": "true", "repo": "r"}\n\n{"task": "t2"}\n')
    assert load_tasks(good, default_repo="d") == [AgentTask("t1", "r", check="true"), AgentTask("t2", "d")]
    assert load_tasks(good, base=tmp_path)[0].repo == str(tmp_path / "r")
    for line, why in (('{"repo": "r"}', "string 'task'"), ("{nope", "not JSON"),
                      ('{"task": "t", "check": 3}', "check must be strings")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"task": "ok"}\n' + line + "\n")
        with pytest.raises(ValueError, match=why) as e:
            load_tasks(bad)
        assert ":2:" in str(e.value)
    with pytest.raises(ValueError, match="not found"):
        resolve_tasks(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="--repo"):
        resolve_tasks("builtin", default_repo=str(tmp_path))
    assert resolve_tasks("builtin") == TASKS


def test_cli_refuses_bad_task_input_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "r.jsonl")
    base = ["agent", "--base-url", "http://127.0.0.1:9", "--out", out, "--no-progress"]
    assert cli_main([*base, "--tasks", "builtin", "--repo", str(tmp_path)]) == 2
    assert "--repo does not combine" in capsys.readouterr().err
    assert cli_main([*base, "--tasks", str(tmp_path / "none.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main([*base, "--task", "x", "--hints", "carrier-pigeon"])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert not Path(out).exists()


# --------------------------------------------------------------------------- checks in the runner


def test_runner_records_solved_from_the_check_in_the_jobs_sandbox() -> None:
    task = TASKS[0]
    assert task.name is not None
    fixer = FakeServer([answer(builtin_solutions()[task.name]), answer(SUBMIT_COMMAND)])
    idle = FakeServer([answer("ls"), answer(SUBMIT_COMMAND)])
    solved = run_jobs([task, task], fixer)
    unsolved = run_jobs([task, AgentTask("no check", None)], idle)
    assert [r.job.solved for r in solved.results] == [True, True]
    assert [r.job.solved for r in unsolved.results] == [False, None]
    assert all(r.job.exit_status == "Submitted" and r.job.steps == 2 for r in solved.results + unsolved.results)
    assert (solved.summary["solved"], solved.summary["checked"]) == (2, 2)
    assert (unsolved.summary["solved"], unsolved.summary["checked"]) == (0, 1)
    assert solved.results[0].job.task_name == task.name and solved.trace_jobs[0].meta["solved"] is True
    assert "solved" not in unsolved.trace_jobs[1].meta
    assert _bash(task.check or "", Path(task.repo or "")) != 0  # the shipped repo itself is untouched


def test_command_output_is_kept_to_the_models_context_in_characters() -> None:
    """A server that reports a 300-token context gets at most 300 characters of a long command output
    per observation; one that does not say gets the full ``max_output_chars``."""
    command = answer("python3 -c \"print('x' * 5000)\"")
    for context, longest in ((300, 300 + 80), (None, 5000)):
        server = FakeServer([command, answer(SUBMIT_COMMAND)], max_model_len=context)
        run_jobs([AgentTask("print", None)], server, model="an-alias-the-server-does-not-list")
        observation = server.chat_bodies()[1]["messages"][-1]["content"]
        assert observation.count("x") <= longest
        assert observation.count("x") >= (250 if context else 5000)


def test_check_runs_in_the_sandbox_not_the_caller(tmp_path: Path) -> None:
    (tmp_path / "flag").write_text("x")
    job = FakeServer([answer("rm flag"), answer(SUBMIT_COMMAND)])
    result = run_jobs([AgentTask("remove flag", str(tmp_path), check="test ! -e flag")], job)
    assert result.results[0].job.solved is True and (tmp_path / "flag").exists()


# --------------------------------------------------------------------------- hint styles


def _one_job(hints: str, stream: bool = True, step_limit: int = 3) -> FakeServer:
    server = FakeServer([answer("echo hi")])
    config = AgentConfig(step_limit=step_limit, max_tokens=16, hints=hints, stream=stream)

    async def go() -> None:
        async with httpx.AsyncClient(base_url="http://fake", transport=server.transport()) as client:
            with Sandbox.create(None, timeout=10, isolation="process") as sb:  # the sandbox is not the point
                await run_agent_job(client, "say hi", sb, "job-7", config, t0=0.0)

    asyncio.run(go())
    return server


@pytest.mark.parametrize("stream", [True, False])
def test_hints_none_sends_no_hint_and_no_delete(stream: bool) -> None:
    server = _one_job("none", stream=stream)
    bodies = server.chat_bodies()
    assert len(bodies) == 3 and not server.deletes()
    for body, headers in zip(bodies, server.chat_headers(), strict=True):
        assert not HINT_KEYS & set(body), body
        assert "job-7" not in json.dumps(body) and "job-7" not in json.dumps(headers)
        assert not {"x-job-id", "x-session-id", "x-claude-code-session-id", "session-id"} & set(headers)


def test_hints_job_id_is_todays_behaviour() -> None:
    server = _one_job("job_id")
    bodies = server.chat_bodies()
    assert [b["job_id"] for b in bodies] == ["job-7"] * 3
    assert [b["is_last_step"] for b in bodies] == [False, False, True]
    assert all("tool_name" not in b for b in bodies)  # unknown before the answer: not sent
    assert server.deletes() == ["/v1/jobs/job-7"]


def test_client_hint_styles_carry_only_their_session_field() -> None:
    header = _one_job("x-job-id", step_limit=1)
    assert header.chat_headers()[0]["x-job-id"] == "job-7" and not HINT_KEYS & set(header.chat_bodies()[0])
    body = _one_job("prompt_cache_key", step_limit=1)
    assert HINT_KEYS & set(body.chat_bodies()[0]) == {"prompt_cache_key"}
    assert body.chat_bodies()[0]["prompt_cache_key"] == "job-7"
    assert not header.deletes() and not body.deletes()


def test_every_listed_style_is_accepted_and_others_refused() -> None:
    for style in HINT_STYLES:
        assert AgentConfig(hints=style).hints == style
    with pytest.raises(ValueError, match="unknown hint style"):
        AgentConfig(hints="carrier-pigeon")


def test_bench_refuses_bad_names_before_any_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "agent-tasks", "--hints", "carrier-pigeon", "--json", ""]) == 2
    assert "unknown style" in capsys.readouterr().err
    assert cli_main(["bench", "agent-tasks", "--policies", "lifo", "--json", ""]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert cli_main(["bench", "agent-tasks", "--model", "/nonexistent/model", "--json", ""]) == 2
    assert "not found" in capsys.readouterr().err
