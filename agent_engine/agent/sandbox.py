"""Run one bash command at a time in a sandbox working folder: a fresh temporary copy of a repository.

This is isolation of the *working tree and environment*, not a security boundary: the command runs as
the current user, without network or filesystem namespaces.

Invariants:
- ``Sandbox.create(repo)`` copies ``repo`` (symlinks kept as links) into a new private temp folder;
  the original is never written: every command runs with its cwd fixed to the copy (``workdir``), and
  each command starts in that folder again (a ``cd`` does not carry over to the next command).
- The environment of a command is exactly ``minimal_env(home)`` (a fixed ``PATH``, ``HOME`` inside
  the sandbox, ``LANG``/``LC_ALL``) plus the explicit ``extra_env``; nothing of the caller's
  environment leaks in (no tokens, no keys).
- A command runs in its own process group; past ``timeout`` seconds the whole group is killed
  (SIGKILL), the result has ``timed_out=True`` and ``exit_code == TIMEOUT_EXIT_CODE``. ``run`` never
  waits more than ``timeout + KILL_GRACE_S`` seconds, and never raises for a failing command.
- ``output`` is stdout and stderr interleaved as the command wrote them, decoded as UTF-8 (invalid
  bytes replaced), and at most ``max_output_chars`` characters: a longer output keeps its head and
  tail around an elision marker (``truncated=True``).
- ``seconds`` is the wall time from process start to the end of reading its output.
- ``close()`` removes the temp folder; it is idempotent (the sandbox is also a context manager).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TIMEOUT_EXIT_CODE", "CommandResult", "Sandbox", "minimal_env", "truncate_output"]

TIMEOUT_EXIT_CODE = 124  # what coreutils' `timeout` returns
KILL_GRACE_S = 2.0
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command."""

    exit_code: int
    output: str
    seconds: float
    timed_out: bool = False
    truncated: bool = False


def minimal_env(home: str | os.PathLike[str]) -> dict[str, str]:
    """The scrubbed environment of a sandboxed command (nothing from ``os.environ``)."""
    return {"PATH": SANDBOX_PATH, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def truncate_output(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters (head + marker + tail); returns (text, truncated)."""
    if len(text) <= max_chars:
        return text, False
    # Size the marker for the largest possible count (len(text)); the real count has no more digits,
    # so head + marker + tail never exceeds max_chars.
    room = max_chars - len(_marker(len(text)))
    if room < 2:
        return text[:max_chars], True
    head, tail = room // 2, room - room // 2
    marker = _marker(len(text) - head - tail)
    return text[:head] + marker + text[len(text) - tail:], True


def _marker(elided: int) -> str:
    return f"\n... [{elided} characters elided] ...\n"


@dataclass
class Sandbox:
    """A temp copy of a repository in which commands run (see the module docstring)."""

    root: Path
    workdir: Path
    home: Path
    timeout: float = 60.0
    max_output_chars: int = 10000
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, repo: str | os.PathLike[str] | None, *, timeout: float = 60.0,
               max_output_chars: int = 10000, extra_env: dict[str, str] | None = None,
               prefix: str = "agent-sandbox-") -> Sandbox:
        """Copy ``repo`` (or start from an empty folder when None) into a new temp sandbox."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if max_output_chars < 1:
            raise ValueError(f"max_output_chars must be >= 1, got {max_output_chars}")
        root = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            workdir = root / "repo"
            if repo is None:
                workdir.mkdir()
            else:
                src = Path(repo)
                if not src.is_dir():
                    raise ValueError(f"repo {src} is not a folder")
                shutil.copytree(src, workdir, symlinks=True)
            home = root / "home"
            home.mkdir()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, workdir, home, timeout, max_output_chars, dict(extra_env or {}))

    def run(self, command: str) -> CommandResult:
        """Run ``command`` with ``bash -c`` in ``workdir``; never raises for a failing command."""
        env = {**minimal_env(self.home), **self.extra_env}
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                ["/bin/bash", "-c", command], cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as e:
            return CommandResult(127, f"could not start the command: {e}", time.perf_counter() - start)
        timed_out = False
        try:
            raw, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill_group(proc)
            try:
                raw, _ = proc.communicate(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:  # a descendant escaped the group and holds the pipe
                raw = b""
                with contextlib.suppress(OSError):
                    proc.stdout.close()  # type: ignore[union-attr]
        seconds = time.perf_counter() - start
        text = (raw or b"").decode("utf-8", errors="replace")
        if timed_out:
            text += f"\n[command timed out after {self.timeout:g} s and was killed]\n"
        output, truncated = truncate_output(text, self.max_output_chars)
        code = TIMEOUT_EXIT_CODE if timed_out else int(proc.returncode)
        return CommandResult(code, output, seconds, timed_out, truncated)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_S)

    def close(self) -> None:
        """Remove the sandbox folder (idempotent)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
