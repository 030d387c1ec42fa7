"""Per-command resource limits, set by util-linux ``prlimit`` in the command's exec chain.

Invariants:
- Every command runs with soft = hard limits on CPU seconds (per process), address space (per
  process), the size of any file it writes, and open files. ``prlimit`` sets them and execs the next
  step, so no Python code runs between fork and exec (safe with the agent's threads).
- The process count is bounded by a pids cgroup (``cgroup.py``) when the machine offers one: the
  sandbox's tasks, threads included, and nothing else. Otherwise by RLIMIT_NPROC, which is per *user*:
  the kernel counts every task (threads included, zombies too) of the command's real uid, inside and
  outside the sandbox, and does not apply it to uid 0. The limit is set to the uid's live tasks when
  the command starts plus ``max_processes``. Zombies are left out of that count: an init that reaps
  lazily (earlier commands' killed processes are its children) would otherwise free slots beyond
  ``max_processes`` mid-command; while they linger the command gets fewer. With a dedicated uid (the
  agent running as root) only sandbox commands count, so a command running alone adds at most
  ``max_processes``; live processes of the uid that exit meanwhile (other sandboxes' commands, or
  under the agent's own uid its other processes) free slots too. For a command running as uid 0 no
  process limit is enforceable.
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


def count_tasks(uid: int, proc: Path = Path("/proc"), zombies: bool = False) -> int:
    """The tasks (threads included) whose real uid is ``uid``: live ones, and zombies when ``zombies``.

    RLIMIT_NPROC counts both; leaving zombies out keeps a limit set from this count from loosening
    when they are reaped.
    """
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:  # gone meanwhile, or unreadable
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        zombie = fields.get("State", "?").split()[0] in ("Z", "X")
        if (zombies or not zombie) and int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1"))
    return total


def prlimit_argv(prlimit: str, limits: Limits, timeout: float, nproc: int | None) -> list[str]:
    """``prlimit`` setting the limits (and RLIMIT_NPROC to ``nproc`` unless None), ending in ``--``."""
    argv = [prlimit, f"--cpu={limits.cpu_for(timeout)}", f"--as={limits.address_space_bytes}",
            f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}"]
    if nproc is not None:
        argv.append(f"--nproc={nproc}")
    return [*argv, "--"]
