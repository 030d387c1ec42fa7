"""Agent tasks: the ``AgentTask`` type, JSONL task files, and the shipped task set (``--tasks builtin``).

A task file holds one JSON object a line: ``task`` (the text the agent gets; required), ``repo`` (the
folder copied into the job's sandbox), ``job_id``, ``name``, ``check`` (a shell command run in the
job's sandbox after the job ends: exit status 0 exactly when the task is solved), ``solution`` (a
shell command that applies the known fix; read by the tests, never sent to the agent), and ``kind``
and ``difficulty`` (labels for reports).

The shipped set (``tasks/tasks.jsonl`` and one tiny repository per task under ``tasks/``, package
data), SWE-style tasks of graded difficulty: a one-line bug the task names (easy), a bug found only
by reading the failing check's output, a missing function to write, a wrong config file (medium), a
fix across two files (hard). Each repository's ``check.py`` needs nothing but ``python3`` and says
what fails.

Invariants:
- Every shipped check exits non-zero on its shipped repository and 0 once its ``solution`` ran there
  (``tests/test_agent_tasks.py`` proves it for every task).
- A relative ``repo`` is resolved against ``base`` when one is given (the shipped set: its own folder),
  else left as written (relative to the working directory, as before).
- Malformed lines raise ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BUILTIN", "TASKS_DIR", "AgentTask", "builtin_solutions", "builtin_tasks", "load_tasks",
           "read_task_lines", "resolve_tasks"]

BUILTIN = "builtin"  # the ``--tasks`` value that selects the shipped set
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
_STRING_FIELDS = ("repo", "job_id", "name", "check", "solution", "kind", "difficulty")


@dataclass(frozen=True)
class AgentTask:
    """One job to run: the task text, the repo to copy (None: an empty folder), an optional job id,
    a name, and the check command that says whether the job solved it (None: not checked)."""

    task: str
    repo: str | None = None
    job_id: str | None = None
    check: str | None = None
    name: str | None = None


def read_task_lines(path: str | Path) -> list[dict[str, Any]]:
    """The task objects of a JSONL file, validated (``task`` a string, the other known fields strings)."""
    out: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON ({e.msg})") from None
            if not isinstance(d, dict) or not isinstance(d.get("task"), str):
                raise ValueError(f"{path}:{lineno}: a task line needs a string 'task'")
            bad = [k for k in _STRING_FIELDS if d.get(k) is not None and not isinstance(d[k], str)]
            if bad:
                raise ValueError(f"{path}:{lineno}: {', '.join(bad)} must be strings")
            out.append(d)
    return out


def load_tasks(path: str | Path, default_repo: str | None = None, base: Path | None = None) -> list[AgentTask]:
    """Tasks from a JSONL file; a line without ``repo`` gets ``default_repo``."""
    tasks: list[AgentTask] = []
    for d in read_task_lines(path):
        repo = d.get("repo", default_repo)
        if repo is not None and base is not None and not Path(repo).is_absolute():
            repo = str(base / repo)
        tasks.append(AgentTask(d["task"], repo, d.get("job_id"), d.get("check"), d.get("name")))
    return tasks


def builtin_tasks() -> list[AgentTask]:
    """The shipped task set, repos as absolute paths inside the installed package."""
    return load_tasks(TASKS_DIR / "tasks.jsonl", base=TASKS_DIR)


def builtin_solutions() -> dict[str, str]:
    """Task name -> the shell command that applies its known fix (in a copy of its repo)."""
    return {d["name"]: d["solution"] for d in read_task_lines(TASKS_DIR / "tasks.jsonl")}


def resolve_tasks(spec: str, default_repo: str | None = None) -> list[AgentTask]:
    """``--tasks SPEC``: ``builtin`` (the shipped set; no ``default_repo`` allowed) or a JSONL path."""
    if spec == BUILTIN:
        if default_repo is not None:
            raise ValueError("--repo does not combine with --tasks builtin (each shipped task has its repo)")
        return builtin_tasks()
    if not Path(spec).is_file():
        raise ValueError(f"task file {spec!r} not found (or use --tasks {BUILTIN} for the shipped set)")
    return load_tasks(spec, default_repo)
