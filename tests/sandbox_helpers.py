"""Helpers shared by the sandbox tests: the isolation modes, finding a test's processes, two checks run per mode."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_engine.agent.sandbox import TIMEOUT_EXIT_CODE, Limits, Sandbox
from agent_engine.agent.sandbox.confine import resolve
from agent_engine.agent.sandbox.limits import count_tasks

__all__ = ["MODES", "check_fork_bomb", "check_timeouts", "live_pids", "namespaces_error", "repo_sandbox", "token"]

MODES = {"namespaces": {"isolation": "namespaces"}, "process": {"isolation": "process"},
         "process-nocgroup": {"isolation": "process", "cgroup": False}}


@contextmanager
def repo_sandbox(root: Path, files: dict[str, str], read_only: tuple[str, ...] = ()) -> Iterator[Sandbox]:
    """A sandbox over a repository of ``files`` (relative path -> text) written under ``root``, the
    ``read_only`` ones made read-only in the sandbox's copy (as a task's check files are); closed after."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    sandbox = Sandbox.create(str(root), timeout=60)
    for rel in read_only:
        (Path(sandbox.workdir_path) / rel).chmod(0o444)
    try:
        yield sandbox
    finally:
        sandbox.close()


def namespaces_error() -> str | None:
    try:
        resolve("namespaces", False)
    except ValueError as e:
        return str(e)
    return None


def live_pids(token: str) -> list[int]:
    """Live (non-zombie) processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] not in "ZX" and token in cmdline:
            found.append(int(entry.name))
    return found


def wait_for_zombies_reaped(uid: int, timeout: float = 10.0) -> None:
    """Until no zombie of ``uid`` is left (or ``timeout``): an earlier test's, which a lazy init reaps late.

    Under the RLIMIT_NPROC fallback each lingering zombie takes one of the command's slots.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and count_tasks(uid, zombies=True) > count_tasks(uid):
        time.sleep(0.05)


def check_fork_bomb(repo: Path, mode: dict[str, Any]) -> None:
    """200 background sleeps under a 40-process limit: refused forks, at most 40 alive, none after."""
    tok, seen = token(), [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen[0] = max(seen[0], len(live_pids(tok)))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    with Sandbox.create(repo, timeout=1.0, limits=Limits(max_processes=40), **mode) as sb:
        wait_for_zombies_reaped(sb.confinement.command_uid)
        watcher.start()
        try:
            res = sb.run(f"for i in $(seq 200); do sleep {tok} & done; wait")
        finally:
            stop.set()
            watcher.join(5)
        assert "Resource temporarily unavailable" in res.output
        assert 10 <= seen[0] <= 40, seen[0]
        assert live_pids(tok) == []
        assert sb.run("echo next").output == "next\n"  # the next command gets its processes back


def check_timeouts(repo: Path, mode: dict[str, Any], timeout: float = 0.5) -> None:
    """Background children holding the pipe, a shell ignoring TERM: each result within 0.5 s of the timeout."""
    tok = token()
    with Sandbox.create(repo, timeout=timeout, **mode) as sb:
        for cmd in (f"sleep {tok} & sleep {tok} & wait", f"trap '' TERM INT; exec sleep {tok}",
                    f"(sleep {tok} &); sleep {tok} > /dev/null 2>&1 <&- & sleep {tok}"):
            t = time.perf_counter()
            res = sb.run(cmd)
            assert time.perf_counter() - t < timeout + 0.5, cmd
            assert res.timed_out and res.exit_code == TIMEOUT_EXIT_CODE
            assert live_pids(tok) == []


def token() -> str:
    """A unique ``sleep`` duration: it names the test's processes in /proc."""
    return f"{700 + int.from_bytes(os.urandom(3), 'big') % 100000 / 1000:.3f}"


# --------------------------------------------------------------------------- timeouts and output
