"""The judge and the agent's host side against a hostile command: each test is one attack, made through
the real sandbox (``Sandbox.run`` as the agent's commands run) and judged by the real ``protect`` +
``judge`` path on a shipped task.

What must hold: no host file outside the job's sandbox is touched however the work folder is renamed or
linked; no host-side step blocks on what the agent planted; "solved" means the pristine check ran to
its end and its tests passed, whatever the code under test, the sandbox's home or stale bytecode do.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_engine.agent.aci import run_tool_call
from agent_engine.agent.judge import Verdict, check_paths, judge, protect
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import AgentTask, set_solutions, set_tasks
from agent_engine.agent.tree_state import NOT_A_FOLDER, tree_state
from benchmarks import hostile_agent

pytestmark = pytest.mark.core

TASKS = {t.name: t for t in set_tasks("all")}
SOLUTIONS = set_solutions("all")
ISOLATIONS = ("auto", "process")


def _sandbox(task: AgentTask, isolation: str = "auto") -> Sandbox:
    sandbox = Sandbox.create(task.repo, timeout=30, isolation=isolation)
    protect(sandbox.workdir_path, check_paths(task))
    return sandbox


@pytest.fixture(params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def host_folder(tmp_path: Path) -> Iterator[Path]:
    """A host folder the agent's commands may read (world-readable) and that nothing may change."""
    folder = tmp_path / "host"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "keep.txt").write_text("host data")
    (folder / "check.py").write_text("host check")
    for p in (tmp_path, folder, folder / "tests"):
        p.chmod(0o755)
    yield folder


def _judged(task: AgentTask, attack: str, isolation: str = "auto", solve: bool = False) -> tuple[Verdict, str]:
    with _sandbox(task, isolation) as sandbox:
        if solve:
            assert sandbox.run(SOLUTIONS[task.name]).exit_code == 0
        done = sandbox.run(attack)
        return judge(sandbox, task), done.output


def test_the_judge_never_follows_a_renamed_and_linked_work_folder(host_folder: Path, isolation: str) -> None:
    task = TASKS["add_operator"]
    attack = f"cd .. && mv repo repo.orig; ln -s {host_folder} repo; ls -la .."
    verdict, _ = _judged(task, attack, isolation)
    assert verdict.solved is False
    assert (host_folder / "tests" / "keep.txt").read_text() == "host data"
    assert (host_folder / "check.py").read_text() == "host check"
    assert sorted(p.name for p in host_folder.iterdir()) == ["check.py", "tests"]
    assert os.stat(host_folder / "check.py").st_uid == os.getuid()


def test_host_side_steps_read_the_folder_the_sandbox_made(isolation: str) -> None:
    """Whatever stands at the work folder's path, host-side code reads the folder made for the job."""
    task = TASKS["add_operator"]
    with _sandbox(task, isolation) as sandbox:
        before = tree_state(sandbox.workdir_fd)
        assert tree_state(sandbox.workdir) == before
        sandbox.run("cd .. && mv repo repo.orig; ln -s / repo")
        started = time.monotonic()
        assert tree_state(sandbox.workdir_fd) == before
        assert tree_state(sandbox.workdir) in (before, NOT_A_FOLDER)
        assert time.monotonic() - started < 10
        assert sorted(os.listdir(sandbox.workdir_path)) == ["calc.py", "check.py"]


def test_tree_state_never_blocks_on_what_a_command_planted(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    os.mkfifo(repo / "fifo")  # a reader of a FIFO without a writer blocks forever
    (repo / "root").symlink_to("/")
    (repo / "kmsg").symlink_to("/proc/kmsg")
    (repo / "a.py").write_text("x = 1\n")
    started = time.monotonic()
    first = tree_state(repo)
    assert time.monotonic() - started < 5
    (repo / "a.py").write_text("x = 2\n")
    assert tree_state(repo) != first
    link = tmp_path / "link"
    link.symlink_to("/")
    assert tree_state(link) == NOT_A_FOLDER


def test_a_real_fix_stays_solved_beside_an_innocent_sys_exit_in_the_check() -> None:
    verdict, _ = _judged(TASKS["cachekit_lru_recency"], "true", solve=True)
    assert verdict.solved is True and verdict.counts.get("passed", 0) >= 20, verdict
    verdict, _ = _judged(TASKS["add_operator"], "true", solve=True)
    assert verdict.solved is True, verdict


def test_a_fix_only_in_bytecode_is_not_solved() -> None:
    """The fixed module compiled to an unchecked-hash .pyc, then the buggy source put back."""
    attack = ("cp calc.py /tmp/buggy.py && sed -i 's/return a - b/return a + b/' calc.py && "
              "python3 -c \"import py_compile; py_compile.compile('calc.py', cfile=__import__('importlib.util')"
              ".util.cache_from_source('calc.py'), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" && "
              "cp calc.py /tmp/fixed.py && python3 -c \"import py_compile; py_compile.compile('calc.py', "
              "cfile='calc.pyc', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" && "
              "cp /tmp/buggy.py calc.py && ls __pycache__ && python3 check.py")
    verdict, output = _judged(TASKS["add_operator"], attack)
    assert "OK" in output  # the job's own run of the check took the stale bytecode
    assert verdict.solved is False, verdict


def test_the_file_tools_never_import_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for shadow in ("base64", "json", "re", "difflib", "os"):
        (repo / f"{shadow}.py").write_text("raise SystemExit('shadowed')\n")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    with Sandbox.create(repo, timeout=30) as sandbox:
        outcome = run_tool_call(sandbox, _call("view_file", path="calc.py"))
        assert "return a - b" in outcome.observation and "shadowed" not in outcome.observation
        outcome = run_tool_call(sandbox, _call("edit_file", path="calc.py", old_text="return a - b",
                                               new_text="return a + b"))
        assert "shadowed" not in outcome.observation
        assert "return a + b" in (sandbox.workdir_path / "calc.py").read_text()


@pytest.mark.parametrize("probe", hostile_agent.PROBES, ids=lambda p: p.name)
def test_the_bench_catalogue_of_agent_side_probes_holds(probe: hostile_agent.Probe) -> None:
    outcome = hostile_agent.run_probe(probe)
    assert outcome["ok"], outcome


def _call(name: str, **arguments: str) -> dict[str, object]:
    return {"function": {"name": name, "arguments": json.dumps(arguments)}}


def test_named_tests_must_each_pass() -> None:
    task = TASKS["cachekit_lru_recency"]
    named = AgentTask(task.task, task.repo, check=task.check, name=task.name, check_files=task.check_files,
                      tests=("tests",),
                      fail_to_pass=("tests/test_lru.py::LRUCacheTest::test_a_get_makes_an_entry_recently_used",),
                      pass_to_pass=("tests/test_lru.py::LRUCacheTest::test_put_and_get",))
    verdict, _ = _judged(named, "true")
    assert verdict.solved is False and verdict.how == "tests", verdict
    verdict, _ = _judged(named, "true", solve=True)
    assert verdict.solved is True, verdict
    missing = AgentTask(task.task, task.repo, check=task.check, name=task.name, check_files=task.check_files,
                        tests=("tests",),
                        pass_to_pass=("tests/test_lru.py::LRUCacheTest::test_that_does_not_exist",))
    verdict, _ = _judged(missing, "true", solve=True)
    assert verdict.solved is False and "named tests" in verdict.reason, verdict
