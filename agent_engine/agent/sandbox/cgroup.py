"""A pids cgroup per sandbox: a hard cap on its tasks and an exact list of its processes.

Invariants:
- ``PidsCgroup.create`` returns None (never raises) when no writable pids hierarchy exists: a cgroup
  v1 ``pids`` hierarchy, or the cgroup v2 root with ``pids`` in its ``cgroup.subtree_control``
  (creating cgroups there needs root). The sandbox then falls back to RLIMIT_NPROC (``limits.py``).
- ``pids.max`` caps the tasks (threads included) of every process in the cgroup; a process joins by
  writing its pid into ``procs_file`` before it forks (the exec chain's first step), and its children
  are born in it, whatever session, process group or namespace they move to.
- ``CommandCgroups`` gives each command a fresh cgroup: a killed process stays charged to its cgroup as
  a zombie until its parent (for orphans, the host's init, which may be slow) reaps it, so a reused
  cgroup would lend the next command fewer pids. A finished command's cgroup is emptied at once and
  removed as soon as its zombies are gone (retried at each command and at ``close``).
- ``kill_all`` sends SIGKILL to every member until the cgroup is empty or its deadline passes;
  ``remove`` kills what is left and removes the folder (a cgroup still holding zombies may outlive it
  briefly; removal is retried until its deadline, then left to the next cleanup).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["CommandCgroups", "PidsCgroup"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _bases(root: Path) -> list[Path]:
    bases = [root / "pids"]  # cgroup v1
    with contextlib.suppress(OSError):
        if "pids" in (root / "cgroup.subtree_control").read_text().split():  # cgroup v2 root
            bases.append(root)
    return [b for b in bases if b.is_dir()]


class PidsCgroup:
    """One cgroup folder with a ``pids.max`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, name: str, max_pids: int, root: Path = CGROUP_ROOT) -> PidsCgroup | None:
        """A new cgroup ``name`` capped at ``max_pids`` tasks, or None when the machine offers none."""
        for base in _bases(root):
            path = base / name
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "pids.max").write_text(str(max_pids))
                return cls(path)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return None

    @property
    def procs_file(self) -> Path:
        """Where a process writes its pid to join."""
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        """The members now (empty once the cgroup is gone)."""
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except OSError:
            return []


    def kill_all(self, timeout: float = 2.0) -> bool:
        """SIGKILL every member until none is left; returns True when the cgroup is empty."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def remove(self, timeout: float = 2.0) -> bool:
        """Kill the members and remove the cgroup; returns True when it is gone."""
        deadline = time.monotonic() + timeout
        self.kill_all(max(timeout, 0.05))
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:  # members not yet reaped
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)


class CommandCgroups:
    """A fresh ``PidsCgroup`` per command under one name prefix (see the module docstring)."""

    def __init__(self, prefix: str, max_pids: int, root: Path = CGROUP_ROOT) -> None:
        self.prefix, self.max_pids, self.root = prefix, max_pids, root
        self._count = 0
        self._left: list[PidsCgroup] = []  # finished commands' cgroups not yet removed

    @classmethod
    def create(cls, prefix: str, max_pids: int, root: Path = CGROUP_ROOT) -> CommandCgroups | None:
        """The series, or None when this machine lets us make no pids cgroup (tried once, here)."""
        probe = PidsCgroup.create(f"{prefix}-probe", max_pids, root)
        if probe is None:
            return None
        probe.remove(0.5)
        return cls(prefix, max_pids, root)

    def start(self) -> PidsCgroup | None:
        """The cgroup of the next command (None when it cannot be made: the caller falls back)."""
        self._sweep(0.0)
        self._count += 1
        return PidsCgroup.create(f"{self.prefix}-{self._count}", self.max_pids, self.root)

    def finish(self, group: PidsCgroup, timeout: float) -> None:
        """Kill what is left of a command and remove its cgroup now or later."""
        group.kill_all(timeout)
        if not group.remove(0.0):
            self._left.append(group)

    def close(self, timeout: float = 2.0) -> bool:
        """Kill and remove every cgroup of the series; True when none is left."""
        return self._sweep(timeout)

    def _sweep(self, timeout: float) -> bool:
        self._left = [g for g in self._left if not g.remove(timeout)]
        return not self._left
