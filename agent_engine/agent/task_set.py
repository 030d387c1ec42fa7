"""Agent tasks: the ``AgentTask`` type, JSONL task files, and the shipped task sets (``--tasks builtin``, ...).

A task file holds one JSON object a line: ``task`` (the text the agent gets; required), ``repo`` (the
folder copied into the job's sandbox), ``job_id``, ``name``, ``check`` (a shell command run in the
job's sandbox after the job ends: exit status 0 exactly when the task is solved), ``check_files``
(a list of the repository's paths that make up the check, restored from the pristine repository
before it runs: ``agent_engine.agent.judge``; default: the file the check command runs), ``tests``
(test files or folders the judge runs with its own runner instead of ``check``), ``fail_to_pass``
and ``pass_to_pass`` (test ids, ``path/test_x.py::Class::test``, that must pass),
``solution`` (a shell command that applies the known fix; read by the tests, never sent to the
agent), and ``kind`` and ``difficulty`` (labels for reports).

The shipped sets (package data under ``tasks/``: one JSONL file per set and one small repository per
task), named by ``TASK_SETS``:
- ``builtin`` (``tasks.jsonl``): 23 SWE-style tasks of graded difficulty, each a tiny repository: a
  one-line bug the task names (easy), a bug found only by reading the failing check's output, a
  missing function to write, a wrong config file (medium), a fix across two files (hard). Each
  ``check.py`` runs in tens of milliseconds.
- ``suites`` (``suites.jsonl``): small libraries whose check is a real ``unittest`` suite of many
  cases that takes seconds of CPU, as real test suites do; the task names only the symptom.
- ``libraries`` (``libraries.jsonl``): real permissively licensed libraries from their PyPI sdists
  (package, own test suite, licence), each with one injected bug that fails some of its own tests;
  the task is written as a user's issue (``docs/agent.md``, "Real-library tasks").
- ``all``: ``builtin`` and ``suites``, ``builtin`` first.
Every shipped check needs nothing but ``python3`` and says what fails.

Invariants:
- Every shipped check exits non-zero on its shipped repository and 0 once its ``solution`` ran there,
  and no solution touches a check file (``tests/test_agent_tasks.py`` and
  ``tests/test_agent_task_suites.py`` prove it for every task; ``tests/test_agent_task_libraries.py``
  through the judge).
- A ``repo`` ending in ``.tar.gz`` is an archived repository, unpacked once into the cache
  (``agent_engine.agent.task_archive``; the ``libraries`` set).
- A relative ``repo`` is resolved against ``base`` when one is given (the shipped sets: their own
  folder), else left as written (relative to the working directory, as before).
- Malformed lines raise ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_engine.agent.task_archive import ARCHIVE_SUFFIX, unpacked_repo

__all__ = ["BUILTIN", "TASKS_DIR", "TASK_SETS", "AgentTask", "builtin_solutions", "builtin_tasks", "load_tasks",
           "read_task_lines", "resolve_tasks", "set_lines", "set_solutions", "set_tasks"]

BUILTIN = "builtin"  # the ``--tasks`` value that selects the 23 small shipped tasks
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
TASK_SETS: dict[str, tuple[str, ...]] = {  # ``--tasks NAME`` -> its JSONL files under TASKS_DIR, in order
    BUILTIN: ("tasks.jsonl",),
    "suites": ("suites.jsonl",),
    "libraries": ("libraries.jsonl",),
    "all": ("tasks.jsonl", "suites.jsonl"),
}
_STRING_FIELDS = ("repo", "job_id", "name", "check", "solution", "kind", "difficulty")
_LIST_FIELDS = ("check_files", "tests", "fail_to_pass", "pass_to_pass")


@dataclass(frozen=True)
class AgentTask:
    """One job to run: the task text, the repo to copy (None: an empty folder), an optional job id,
    a name, the check command that says whether the job solved it (None: not checked), the paths
    that make up the check (None: those the command names), the test files or folders the judge runs
    (None: the judge runs ``check`` itself) and the test ids that must pass (SWE-bench's FAIL_TO_PASS
    and PASS_TO_PASS; empty: every test that ran must pass): ``agent_engine.agent.judge``."""

    task: str
    repo: str | None = None
    job_id: str | None = None
    check: str | None = None
    name: str | None = None
    check_files: tuple[str, ...] | None = None
    tests: tuple[str, ...] | None = None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()


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
            for key in _LIST_FIELDS:
                items = d.get(key)
                if items is not None and (not isinstance(items, list) or not all(isinstance(f, str) for f in items)):
                    raise ValueError(f"{path}:{lineno}: {key} must be a list of strings")
            out.append(d)
    return out


def load_tasks(path: str | Path, default_repo: str | None = None, base: Path | None = None) -> list[AgentTask]:
    """Tasks from a JSONL file; a line without ``repo`` gets ``default_repo``."""
    tasks: list[AgentTask] = []
    for d in read_task_lines(path):
        repo = d.get("repo", default_repo)
        if repo is not None and base is not None and not Path(repo).is_absolute():
            repo = str(base / repo)
        if repo is not None and repo.endswith(ARCHIVE_SUFFIX):
            repo = str(unpacked_repo(Path(repo)))
        files, tests = d.get("check_files"), d.get("tests")
        tasks.append(AgentTask(d["task"], repo, d.get("job_id"), d.get("check"), d.get("name"),
                               None if files is None else tuple(files), None if tests is None else tuple(tests),
                               tuple(d.get("fail_to_pass") or ()), tuple(d.get("pass_to_pass") or ())))
    return tasks


def set_lines(name: str) -> list[dict[str, Any]]:
    """The task objects of the shipped set ``name`` (a key of ``TASK_SETS``), in order."""
    if name not in TASK_SETS:
        raise ValueError(f"unknown task set {name!r}; shipped: {', '.join(TASK_SETS)}")
    return [d for f in TASK_SETS[name] for d in read_task_lines(TASKS_DIR / f)]


def set_tasks(name: str) -> list[AgentTask]:
    """The shipped set ``name``, repos as absolute paths inside the installed package."""
    if name not in TASK_SETS:
        raise ValueError(f"unknown task set {name!r}; shipped: {', '.join(TASK_SETS)}")
    return [t for f in TASK_SETS[name] for t in load_tasks(TASKS_DIR / f, base=TASKS_DIR)]


def set_solutions(name: str) -> dict[str, str]:
    """Task name -> the shell command that applies its known fix (in a copy of its repo), for set ``name``."""
    return {d["name"]: d["solution"] for d in set_lines(name)}


def builtin_tasks() -> list[AgentTask]:
    """The 23 small shipped tasks (the ``builtin`` set)."""
    return set_tasks(BUILTIN)


def builtin_solutions() -> dict[str, str]:
    """Task name -> known fix, for the ``builtin`` set."""
    return set_solutions(BUILTIN)


def resolve_tasks(spec: str, default_repo: str | None = None) -> list[AgentTask]:
    """``--tasks SPEC``: a shipped set's name (``TASK_SETS``; no ``default_repo`` allowed) or a JSONL path
    (a file named like a set is given as a path: ``./all``)."""
    if spec in TASK_SETS:
        if default_repo is not None:
            raise ValueError(f"--repo does not combine with --tasks {spec} (each shipped task has its repo)")
        return set_tasks(spec)
    if not Path(spec).is_file():
        raise ValueError(f"task file {spec!r} not found (or use --tasks NAME for a shipped set: "
                         f"{', '.join(TASK_SETS)})")
    return load_tasks(spec, default_repo)
