"""The shipped task sets, and the ``suites`` tasks: small libraries whose checks are real test suites.

The fast tests read the sets; the slow ones run each suite (seconds of CPU each) on the shipped code,
where it must fail, and after the task's reference fix, where it must pass, and one whole job per
task in the real sandbox, judged on the pristine check.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from agent_fakes import FakeServer, answer, run_jobs

from agent_engine.agent.judge import check_paths
from agent_engine.agent.task_set import (
    BUILTIN,
    TASK_SETS,
    TASKS_DIR,
    AgentTask,
    builtin_tasks,
    load_tasks,
    resolve_tasks,
    set_lines,
    set_solutions,
    set_tasks,
)
from agent_engine.agent.text_interface import SUBMIT_COMMAND

SUITES = set_tasks("suites")
SOLUTIONS = set_solutions("suites")
CHECK_TIMEOUT_S = 120  # a suite takes seconds; a busy machine may stretch that several times


def _bash(command: str, cwd: Path) -> tuple[int, str, float]:
    t = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - t


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- the sets (fast)


@pytest.mark.core
def test_the_23_small_tasks_are_still_the_builtin_set_and_all_adds_the_suites() -> None:
    builtin = resolve_tasks(BUILTIN)
    assert len(builtin) == 23 and builtin == builtin_tasks()
    assert resolve_tasks("suites") == SUITES and resolve_tasks("all") == builtin + SUITES
    assert not {t.name for t in builtin} & {t.name for t in SUITES}
    assert set(TASK_SETS) == {"builtin", "suites", "libraries", "all"}
    for name in TASK_SETS:
        with pytest.raises(ValueError, match="--repo"):
            resolve_tasks(name, default_repo="/tmp")
    with pytest.raises(ValueError, match="unknown task set"):
        set_tasks("nope")


@pytest.mark.core
def test_every_suite_task_is_a_library_with_a_real_test_suite() -> None:
    assert 4 <= len(SUITES) <= 6 and len({t.name for t in SUITES}) == len(SUITES)
    assert set(SOLUTIONS) == {t.name for t in SUITES}
    labels = {d["name"]: (d["kind"], d["difficulty"]) for d in set_lines("suites")}
    for t in SUITES:
        assert t.repo is not None and Path(t.repo).parent == TASKS_DIR and t.check == "python3 check.py"
        assert check_paths(t) == ("check.py", "tests") and "check.py" in t.task
        repo = Path(t.repo)
        tests = sorted((repo / "tests").glob("test_*.py"))
        n_cases = sum(f.read_text().count("    def test_") for f in tests)
        assert len(tests) >= 3 and n_cases >= 20, (t.name, len(tests), n_cases)
        packages = [p for p in repo.iterdir() if p.is_dir() and (p / "__init__.py").is_file() and p.name != "tests"]
        assert len(packages) == 1 and len(list(packages[0].glob("*.py"))) >= 3, t.name
        assert labels[t.name][0] == "test suite" and labels[t.name][1] in ("medium", "hard")


@pytest.mark.core
def test_check_files_are_read_and_validated(tmp_path: Path) -> None:
    good = tmp_path / "t.jsonl"
    good.write_text('{"task": "t", "check": "true", "check_files": ["check.py", "tests"]}\n{"task": "u"}\n')
    assert [t.check_files for t in load_tasks(good)] == [("check.py", "tests"), None]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t", "check_files": "check.py"}\n')
    with pytest.raises(ValueError, match=":1: check_files must be a list of strings"):
        load_tasks(bad)


# --------------------------------------------------------------------------- the suites themselves (slow)


@pytest.mark.slow
@pytest.mark.parametrize("task", SUITES, ids=[t.name or "" for t in SUITES])
def test_suite_fails_as_shipped_and_passes_after_the_reference_fix(task: AgentTask, tmp_path: Path) -> None:
    assert task.repo is not None and task.check is not None and task.name is not None
    repo = Path(shutil.copytree(task.repo, tmp_path / "repo"))
    before = _files(repo)
    code, output, failing_s = _bash(task.check, repo)
    assert code != 0 and "FAILED" in output, output[-2000:]
    assert _bash(SOLUTIONS[task.name], repo)[0] == 0
    changed = [name for name, text in _files(repo).items() if before.get(name) != text]
    assert len(changed) == 1 and not changed[0].startswith(("check.py", "tests/")), changed  # the code, not the check
    code, output, passing_s = _bash(task.check, repo)
    assert code == 0 and "\nOK" in output, output[-2000:]
    ran = int(output.split("Ran ")[1].split()[0])
    assert ran >= 20, output[-500:]
    print(f"\n{task.name}: {ran} tests; check {failing_s:.2f} s failing, {passing_s:.2f} s passing (wall)")


@pytest.mark.slow
@pytest.mark.parametrize("task", SUITES, ids=[t.name or "" for t in SUITES])
def test_a_job_is_judged_in_its_sandbox_on_the_pristine_suite(task: AgentTask) -> None:
    assert task.name is not None
    fix = FakeServer([answer(SOLUTIONS[task.name]), answer(SUBMIT_COMMAND)])
    gutted = FakeServer([answer("chmod -R u+w check.py tests && rm -rf tests && printf 'raise SystemExit(0)\\n' > check.py "
                                 "&& python3 check.py"), answer(SUBMIT_COMMAND)])
    assert run_jobs([task], fix).results[0].job.solved is True
    cheated = run_jobs([task], gutted).results[0]
    assert cheated.messages[-2]["content"].startswith("<returncode>0</returncode>")  # it passed in the job ...
    assert cheated.job.solved is False  # ... not when judged
