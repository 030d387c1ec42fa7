"""Per-command resource limits, set by util-linux ``prlimit`` in the command's exec chain.

Invariants:
- Every command runs with soft = hard limits on CPU seconds (per process), address space (per
  process), the size of any file it writes, and open files. ``prlimit`` sets them and execs the next
  step, so no Python code runs between fork and exec (safe with the agent's threads).
- The process count is bounded by a pids cgroup (``cgroup.py``) when the machine offers one: the
  sandbox's tasks, threads included, and nothing else. Otherwise by RLIMIT_NPROC, which is per *user*:
  the kernel counts every task (threads included) of the command's real uid, inside and outside the
  sandbox, and does not apply it to uid 0. The limit is set to the tasks that uid has when the command
  starts plus ``max_processes``, so the command adds at most that many (fewer when other processes of
  the uid start meanwhile); for a command running as uid 0 no process limit is enforceable.
- CPU seconds default to the command timeout times the CPU count (plus one): a backstop for a
  process that escaped the wall-clock kill, not a second timeout.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "count_tasks", "prlimit_argv"]


@dataclass(frozen=True)
class Limits:
    """What one command may use; ``cpu_seconds=None`` derives it from the timeout."""

    cpu_seconds: int | None = None
    address_space_bytes: int = 4 << 30
    file_size_bytes: int = 1 << 30
    open_files: int = 1024
    max_processes: int = 128

    def __post_init__(self) -> None:
        for name in ("address_space_bytes", "file_size_bytes", "open_files", "max_processes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.cpu_seconds is not None and self.cpu_seconds < 1:
            raise ValueError(f"cpu_seconds must be >= 1, got {self.cpu_seconds}")

    def cpu_for(self, timeout: float) -> int:
        """The CPU-seconds limit of a command with this wall-clock ``timeout``."""
        if self.cpu_seconds is not None:
            return self.cpu_seconds
        return math.ceil(timeout) * (os.cpu_count() or 1) + 1


def count_tasks(uid: int, proc: Path = Path("/proc")) -> int:
    """The tasks (threads included) whose real uid is ``uid``: what RLIMIT_NPROC counts."""
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:  # gone meanwhile, or unreadable
            continue
        real_uid, threads = -1, 1
        for line in status.splitlines():
            if line.startswith("Uid:"):
                real_uid = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        if real_uid == uid:
            total += threads
    return total


def prlimit_argv(prlimit: str, limits: Limits, timeout: float, nproc: int | None) -> list[str]:
    """``prlimit`` setting the limits (and RLIMIT_NPROC to ``nproc`` unless None), ending in ``--``."""
    argv = [prlimit, f"--cpu={limits.cpu_for(timeout)}", f"--as={limits.address_space_bytes}",
            f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}"]
    if nproc is not None:
        argv.append(f"--nproc={nproc}")
    return [*argv, "--"]
