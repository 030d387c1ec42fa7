"""The per-user process count behind the RLIMIT_NPROC fallback: live tasks of one uid, zombies left out."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from agent_engine.agent.sandbox.limits import count_tasks

pytestmark = pytest.mark.core


def _fake_task(proc: Path, pid: int, state: str, uid: int, threads: int) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "status").write_text(
        f"Name:\tx\nState:\t{state}\nPid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nThreads:\t{threads}\n")


def test_counts_threads_of_live_tasks_of_the_uid_only(tmp_path: Path) -> None:
    _fake_task(tmp_path, 10, "S (sleeping)", 1000, 3)
    _fake_task(tmp_path, 11, "R (running)", 1000, 1)
    _fake_task(tmp_path, 12, "Z (zombie)", 1000, 1)  # reaped later: must not loosen a limit set now
    _fake_task(tmp_path, 13, "S (sleeping)", 1001, 5)
    (tmp_path / "self").mkdir()
    (tmp_path / "14").mkdir()  # gone meanwhile: no status file
    assert count_tasks(1000, tmp_path) == 4
    assert count_tasks(1001, tmp_path) == 5
    assert count_tasks(1002, tmp_path) == 0
    assert count_tasks(1000, tmp_path, zombies=True) == 5


def test_a_real_zombie_is_not_counted(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / str(child.pid)).symlink_to(f"/proc/{child.pid}")  # a /proc holding only the child
        assert count_tasks(os.getuid(), tmp_path) == 1
        child.kill()
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        assert count_tasks(os.getuid(), tmp_path) == 0  # dead but unreaped: not a live task
    finally:
        child.kill()
        child.wait()
