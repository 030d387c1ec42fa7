"""mini-swe-agent, unmodified, as a row of ``bench agent-tasks`` (``--interfaces mini``).

Each task runs the real ``mini`` CLI (mini-swe-agent 2.x, its default tool-calling config
``mini.yaml``: one ``bash`` tool, ``tool_choice`` left to the model unless ``--mini-tool-choice``
says "required") against the row's server, in a
fresh copy of the task's repository, then the task's check decides whether it was solved.

Invariants:
- Only configuration is passed (``-c key=value``: step limit, no cost limit, yolo mode, the server's
  URL, ``max_tokens``, temperature, the command timeout and working folder); mini-swe-agent sends no
  job hint, so its rows use the hint style ``none`` (the server infers its jobs).
- mini-swe-agent runs its commands with its own ``LocalEnvironment``: a subprocess in the task's
  copy, NOT in our sandbox. Run this interface only on a machine you are willing to let a small model
  type into (the task repositories are tiny and the commands bounded by ``--command-timeout``).
- A job's outcome has the shape of our agent's (solved, steps, format errors, JCT, exit status), so
  both agents share one table; every job is bounded (step limit, per-job wall-clock limit).
- It is judged as our agent is (``agent_engine.agent.judge``): the same repository with its check
  files read-only, and the check run on the pristine check files put back after the job.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent_engine.agent.judge import check_paths, judge, protect
from agent_engine.agent.sandbox import Sandbox

MINI = Path(sys.executable).with_name("mini")
JOB_TIMEOUT_FACTOR = 4.0  # a job may take this many times step_limit x command_timeout, at most


def mini_available() -> bool:
    return MINI.exists()


def run_mini_jobs(base_url: str, model: str, tasks: list[Any], args: Any) -> dict[str, Any]:
    """Run every task as one mini-swe-agent job, ``args.concurrency`` at once; summary and outcomes."""
    if not mini_available():
        raise RuntimeError(f"mini-swe-agent is not installed next to {sys.executable} (pip install mini-swe-agent)")
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        outcomes = list(pool.map(lambda t: _one_job(base_url, model, t, args), tasks))
    return {"summary": summarize(outcomes), "outcomes": outcomes}


def _one_job(base_url: str, model: str, task: Any, args: Any) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="mini-job-"))
    try:
        repo = work / "repo"
        if task.repo:
            shutil.copytree(task.repo, repo)
            protect(repo, check_paths(task))
        else:
            repo.mkdir()
        trajectory = work / "trajectory.json"
        t0 = time.perf_counter()
        timed_out = _run_mini(base_url, model, task.task, repo, trajectory, args)
        jct = time.perf_counter() - t0
        steps, format_errors, exit_status = _read_trajectory(trajectory)
        solved = judge_copy(task, repo, args.command_timeout)
        return {"task": task.name, "solved": solved, "steps": steps, "format_errors": format_errors,
                "exit_status": "Timeout" if timed_out else exit_status, "jct_s": jct, "error": None}
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return {"task": task.name, "solved": False, "steps": 0, "format_errors": 0, "exit_status": "Error",
                "jct_s": None, "error": str(e)[:500]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_mini(base_url: str, model: str, task_text: str, repo: Path, trajectory: Path, args: Any) -> bool:
    """Run the CLI to the end; True when it hit the per-job wall-clock limit."""
    sets = {"agent.step_limit": args.step_limit, "agent.cost_limit": 0, "agent.mode": "yolo",
            "model.model_kwargs.api_base": f"{base_url}/v1", "model.model_kwargs.api_key": "unused",
            "model.model_kwargs.max_tokens": args.max_tokens, "model.model_kwargs.temperature": args.temperature,
            "environment.cwd": str(repo), "environment.timeout": int(args.command_timeout)}
    if args.mini_tool_choice != "auto":
        sets["model.model_kwargs.tool_choice"] = args.mini_tool_choice
    cmd = [str(MINI), "-c", "mini.yaml", *[x for k, v in sets.items() for x in ("-c", f"{k}={v}")],
           "-m", f"openai/{model}", "-t", task_text, "-y", "--exit-immediately", "-o", str(trajectory)]
    env = {**os.environ, "MSWEA_CONFIGURED": "true", "MSWEA_GLOBAL_CONFIG_DIR": str(trajectory.parent / "cfg"),
           "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    limit = JOB_TIMEOUT_FACTOR * args.step_limit * max(args.command_timeout, 30.0)
    try:
        subprocess.run(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return True
    return False


def _read_trajectory(path: Path) -> tuple[int, int, str]:
    """(model calls, format errors, exit status) of a saved trajectory (zeros when there is none)."""
    if not path.exists():
        return 0, 0, "NoTrajectory"
    data = json.loads(path.read_text())
    messages = data.get("messages", [])
    answers = sum(1 for m in messages if m.get("role") == "assistant")
    # A rejected answer is not kept; the feedback that replaced it is a user message marked FormatError.
    format_errors = sum(1 for m in messages if (m.get("extra") or {}).get("interrupt_type") == "FormatError")
    return answers + format_errors, format_errors, str(data.get("info", {}).get("exit_status", "unknown"))


def judge_copy(task: Any, repo: Path, timeout: float) -> bool | None:
    """Whether ``task`` is solved in ``repo`` (mini-swe-agent's copy), judged exactly as our own jobs
    are (``agent_engine.agent.judge``: in a sandbox made from the copy, its tests run and passed);
    None without a check."""
    if not task.check and task.tests is None:
        return None
    with Sandbox.create(repo, timeout=max(timeout, 30.0)) as sandbox:
        return judge(sandbox, task).solved


def summarize(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields of our runner's summary that the table shows, for mini-swe-agent's jobs."""
    jcts = sorted(o["jct_s"] for o in outcomes if o["jct_s"] is not None)
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o["exit_status"]] = statuses.get(o["exit_status"], 0) + 1
    return {"jobs": len(outcomes), "solved": sum(1 for o in outcomes if o["solved"]),
            "checked": sum(1 for o in outcomes if o["solved"] is not None),
            "jobs_failed": sum(1 for o in outcomes if o["error"]),
            "steps_mean": statistics.fmean(o["steps"] for o in outcomes) if outcomes else None,
            "format_errors": sum(o["format_errors"] for o in outcomes),
            "jct_mean": statistics.fmean(jcts) if jcts else None,
            "jct_p90": jcts[min(len(jcts) - 1, int(0.9 * len(jcts)))] if jcts else None,
            "exit_statuses": statuses}
