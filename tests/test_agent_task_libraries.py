"""The ``libraries`` tasks: real libraries from their PyPI sdists, each with one injected bug.

The fast tests read the set and the repositories (the check is the judge's runner byte for byte, the
licence is there, no test needs pytest, the task text names no file of the code); the slow ones judge
each task through the real judge in the real sandbox, as a job is judged: not solved as shipped, with
every ``fail_to_pass`` test among the failing ones, and solved once the task's known fix ran, which
changes the library's code and no check file.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

from agent_engine.agent import check_runner
from agent_engine.agent.judge import check_paths, judge, protect
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import (
    TASKS_DIR,
    AgentTask,
    resolve_tasks,
    set_lines,
    set_solutions,
    set_tasks,
)

LIBRARIES = set_tasks("libraries")
LINES = {d["name"]: d for d in set_lines("libraries")}
SOLUTIONS = set_solutions("libraries")
IDS = [t.name or "" for t in LIBRARIES]
TAIL = "runs the library's test suite and exits 0 once every test passes; the tests are read-only."
SANDBOX_TIMEOUT_S = 120  # a suite takes a few seconds; a busy machine may stretch that several times


def _under(rel: str, paths: tuple[str, ...]) -> bool:
    return any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in paths)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


# --------------------------------------------------------------------------- the set (fast)


@pytest.mark.core
def test_the_libraries_set_is_shipped_beside_the_others() -> None:
    assert resolve_tasks("libraries") == LIBRARIES
    assert len(LIBRARIES) >= 10 and len(set(IDS)) == len(LIBRARIES) and set(SOLUTIONS) == set(IDS)
    assert not set(IDS) & {t.name for t in set_tasks("all")}
    assert len({d["repo"] for d in LINES.values()}) == len(LINES)


@pytest.mark.core
@pytest.mark.parametrize("task", LIBRARIES, ids=IDS)
def test_each_task_is_a_library_with_its_own_tests_and_licence(task: AgentTask) -> None:
    line = LINES[task.name or ""]
    assert line["kind"] == "real library" and line["difficulty"] in ("easy", "medium", "hard")
    assert line["repo"].startswith("libraries/") and (TASKS_DIR / line["repo"]).is_file() and task.tests
    assert task.repo is not None and Path(task.repo).is_dir()  # unpacked from its archive
    repo = Path(task.repo)
    # the check: the judge's runner, run on the task's test paths, and those paths are check files
    assert (repo / "check.py").read_bytes() == Path(check_runner.__file__).read_bytes()
    default = list(task.tests) == ["tests"]
    assert task.check == "python3 check.py" + ("" if default else "".join(f" {p}" for p in task.tests))
    assert check_paths(task)[0] == "check.py" and set(task.tests) <= set(check_paths(task))
    assert all((repo / p).exists() for p in check_paths(task))
    assert any(p.name.upper().startswith(("LICENSE", "COPYING")) for p in repo.iterdir())
    # the library's own tests, runnable with the standard library only
    test_files = [f for p in task.tests for f in ([repo / p] if (repo / p).is_file() else (repo / p).rglob("*.py"))]
    assert test_files and not [f for f in test_files if re.search(r"^\s*(import|from)\s+pytest\b", f.read_text(), re.M)]
    assert not [p for p in repo.rglob("*") if p.suffix in (".c", ".h", ".so", ".pyd", ".pyc")]
    # the failing tests, named as the runner names them, in the task's test files
    assert task.fail_to_pass and not task.pass_to_pass
    for test_id in task.fail_to_pass:
        path = test_id.split("::")[0]
        assert (repo / path).is_file() and _under(path, task.tests), test_id


@pytest.mark.core
@pytest.mark.parametrize("task", LIBRARIES, ids=IDS)
def test_the_task_reads_as_an_issue_that_names_no_file_of_the_code(task: AgentTask) -> None:
    assert task.repo is not None
    assert task.task.endswith(f"`{task.check}` {TAIL}")
    assert "```python" in task.task  # a reproduction
    checks = check_paths(task)
    code = [rel for rel in _files(Path(task.repo)) if not _under(rel, checks)]
    assert code
    for rel in code:  # an extensionless name (``bin/jsonpointer``) is the library's name too: paths only
        name = PurePosixPath(rel).name
        assert rel not in task.task and ("." not in name or name not in task.task), rel


# --------------------------------------------------------------------------- judged in the sandbox (slow)


@pytest.mark.slow
@pytest.mark.parametrize("task", LIBRARIES, ids=IDS)
def test_judged_not_solved_as_shipped_and_solved_after_the_known_fix(task: AgentTask) -> None:
    assert task.name is not None
    checks = check_paths(task)
    with Sandbox.create(task.repo, timeout=SANDBOX_TIMEOUT_S) as sandbox:
        protect(sandbox.workdir_path, checks)
        shipped = judge(sandbox, task)
        assert shipped.solved is False and shipped.how == "tests", shipped
        assert set(task.fail_to_pass) <= set(shipped.failing), (shipped.failing, shipped.reason)
        before = _files(sandbox.workdir_path)
        done = sandbox.run(SOLUTIONS[task.name])
        assert done.exit_code == 0, done.output[-2000:]
        after = _files(sandbox.workdir_path)
        changed = sorted(rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel))
        assert changed and not [rel for rel in changed if _under(rel, checks)], changed  # the code, not the check
        fixed = judge(sandbox, task)
        assert fixed.solved is True, fixed
        assert fixed.counts.get("passed", 0) >= 20 and not fixed.failing, fixed.counts
        print(f"\n{task.name}: {sum(fixed.counts.values())} tests {fixed.counts}; shipped failing {len(shipped.failing)}")
