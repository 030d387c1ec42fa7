"""Judging: a task's check always runs on its pristine check files, whatever the agent did to them.

The runner tests drive real jobs through a scripted fake server (``agent_fakes.FakeServer``) whose
"model" rewrites the check to pass instead of fixing the code: the job's own run of the check passes,
the judged one does not.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from agent_fakes import FakeServer, answer, run_jobs

from agent_engine.agent.judge import check_paths, protect, restore
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import AgentTask, builtin_solutions, builtin_tasks
from agent_engine.agent.text_interface import SUBMIT_COMMAND
from benchmarks.mini_swe import judge_copy

pytestmark = pytest.mark.core

TASK = next(t for t in builtin_tasks() if t.name == "add_operator")
CHEAT = "chmod u+w check.py; printf 'raise SystemExit(0)\\n' > check.py && python3 check.py"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "pristine"
    (repo / "tests").mkdir(parents=True)
    (repo / "check.py").write_text("import sys\nsys.exit(0 if open('tests/ok').read() == 'yes' else 1)\n")
    (repo / "tests" / "ok").write_text("yes")
    (repo / "code.py").write_text("x = 1\n")
    return repo


def test_check_paths_are_named_or_the_script_the_check_runs(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "run.sh").write_text("exit 0\n")
    def paths(check: str | None, files: tuple[str, ...] | None = None) -> tuple[str, ...]:
        return check_paths(AgentTask("t", str(repo), check=check, check_files=files))
    assert paths("python3 check.py") == ("check.py",) and paths("python3 -B check.py -v") == ("check.py",)
    assert paths("bash run.sh") == ("run.sh",) and paths("./run.sh") == ("run.sh",)
    assert paths("test ! -e code.py") == () and paths("python3 -m unittest") == () and paths(None) == ()
    assert paths("python3 missing.py") == ()
    assert paths("true", ("check.py", "tests/")) == ("check.py", "tests")
    for bad in ("../x", "/etc/passwd", "."):
        with pytest.raises(ValueError, match="inside the repository"):
            paths("true", (bad,))
    assert check_paths(TASK) == ("check.py",)


def test_protect_makes_check_files_read_only_and_leaves_the_rest(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    protect(repo, ("check.py", "tests"))
    assert not os.stat(repo / "check.py").st_mode & 0o222 and not os.stat(repo / "tests" / "ok").st_mode & 0o222
    assert os.stat(repo / "code.py").st_mode & 0o200 and os.stat(repo / "tests").st_mode & 0o200


def test_restore_undoes_edits_deletions_links_and_swapped_kinds(tmp_path: Path) -> None:
    pristine = _repo(tmp_path)
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("untouched")
    subprocess.run(["cp", "-a", str(pristine), str(work)], check=True)
    (work / "check.py").unlink()
    (work / "check.py").symlink_to(outside / "victim")  # writing through it would escape the workdir
    (work / "tests" / "ok").write_text("no")
    (work / "code.py").write_text("x = 2\n")  # the agent's own change stays
    restore(pristine, work, ("check.py", "tests"))
    assert not (work / "check.py").is_symlink() and (work / "check.py").read_text() == (pristine / "check.py").read_text()
    assert (work / "tests" / "ok").read_text() == "yes" and (outside / "victim").read_text() == "untouched"
    assert (work / "code.py").read_text() == "x = 2\n"
    # a check folder swapped for a link to elsewhere, a check file swapped for a folder
    subprocess.run(["rm", "-rf", str(work / "tests"), str(work / "check.py")], check=True)
    (work / "tests").symlink_to(outside)
    (work / "check.py").mkdir()
    restore(pristine, work, ("check.py", "tests/ok"))
    assert (work / "tests").is_dir() and not (work / "tests").is_symlink() and (work / "tests" / "ok").read_text() == "yes"
    assert (work / "check.py").is_file() and sorted(p.name for p in outside.iterdir()) == ["victim"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_restored_files_belong_to_the_sandbox_user(tmp_path: Path) -> None:
    pristine = _repo(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    restore(pristine, work, ("check.py", "tests/ok"), uid=65534)
    assert {os.lstat(p).st_uid for p in (work / "check.py", work / "tests", work / "tests" / "ok")} == {65534}


def test_an_agent_that_rewrites_the_check_to_pass_is_not_solved() -> None:
    cheat = FakeServer([answer(CHEAT), answer(SUBMIT_COMMAND)])
    result = run_jobs([TASK], cheat)
    job = result.results[0]
    assert job.messages[-2]["content"].startswith("<returncode>0</returncode>")  # the rewritten check passed in the job
    assert job.job.exit_status == "Submitted" and job.job.solved is False and result.summary["solved"] == 0


def test_an_agent_that_deletes_the_check_or_fixes_the_code_is_judged_on_the_pristine_check() -> None:
    gone = FakeServer([answer("rm -f check.py && ls"), answer(SUBMIT_COMMAND)])
    assert run_jobs([TASK], gone).results[0].job.solved is False
    fix = builtin_solutions()[TASK.name or ""]
    both = FakeServer([answer(f"{fix} && {CHEAT}"), answer(SUBMIT_COMMAND)])
    assert run_jobs([TASK], both).results[0].job.solved is True


def test_the_check_file_is_read_only_in_the_jobs_sandbox() -> None:
    with Sandbox.create(TASK.repo, timeout=20, isolation="process") as sb:
        protect(sb.workdir, check_paths(TASK))
        out = sb.run("echo 'raise SystemExit(0)' > check.py")
        if sb.confinement.command_uid != 0:  # root ignores file modes; the restore still holds there
            assert out.exit_code != 0 and "Permission denied" in out.output
        assert sb.run("python3 check.py").exit_code != 0


def test_mini_swe_agent_is_judged_on_the_pristine_check_too(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    subprocess.run(["cp", "-a", str(TASK.repo), str(copy)], check=True)
    (copy / "check.py").write_text("raise SystemExit(0)\n")
    assert judge_copy(TASK, copy, 20) is False
    assert subprocess.run(["bash", "-c", builtin_solutions()[TASK.name or ""]], cwd=copy).returncode == 0
    assert judge_copy(TASK, copy, 20) is True
    assert judge_copy(AgentTask("t", None), copy, 20) is None
