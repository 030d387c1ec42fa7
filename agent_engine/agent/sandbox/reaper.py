"""Find and kill a sandbox's processes by what marks them: their session or their environment.

Invariants:
- A process is ours when its session id is one the sandbox created (every command starts in a new
  session) or its environment holds the sandbox's marker (``MARKER_VAR=<sandbox id>``, in every
  command's environment). A process that both left the session (``setsid``) and cleared its
  environment (``env -i``) escapes this scan; the pids cgroup and the PID namespace, when present,
  do not depend on such marks.
- ``reap`` never signals the calling process, zombies (they are already dead) or processes it cannot
  read; it repeats the scan until one finds nothing or its deadline passes, and returns what it
  killed.
- ``make_non_dumpable`` sets PR_SET_DUMPABLE to 0 on the calling process: its ``/proc/<pid>/environ``
  (and memory) become unreadable to other processes of the same uid that lack CAP_SYS_PTRACE, at the
  cost of core dumps and same-uid debuggers (ptrace, py-spy) for this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

__all__ = ["MARKER_VAR", "find_marked", "make_non_dumpable", "reap"]

MARKER_VAR = "AGENT_SANDBOX_ID"
_PR_SET_DUMPABLE = 4


def _session_and_state(stat: str) -> tuple[int, str]:
    # /proc/<pid>/stat: "pid (comm) state ppid pgrp session ..."; comm may hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[3]), fields[0]


def find_marked(marker: str, sessions: Collection[int], proc: Path = Path("/proc")) -> list[int]:
    """Live processes (not zombies, not this one) in one of ``sessions`` or carrying ``marker``."""
    needle = f"{MARKER_VAR}={marker}\0".encode()
    me, found = os.getpid(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            sid, state = _session_and_state((entry / "stat").read_text())
            if state in ("Z", "X"):
                continue
            if sid in sessions or needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
    return found


def reap(marker: str, sessions: Collection[int], timeout: float = 2.0) -> list[int]:
    """SIGKILL our marked processes until a scan finds none (or ``timeout``); returns the pids killed."""
    deadline = time.monotonic() + timeout
    killed: list[int] = []
    while True:
        pids = find_marked(marker, sessions)
        if not pids:
            return killed
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if time.monotonic() >= deadline:
            return killed
        time.sleep(0.005)


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (see the module docstring); returns False where prctl is missing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
