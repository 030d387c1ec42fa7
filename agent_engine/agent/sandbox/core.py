"""``Sandbox``: run one bash command at a time in a fresh temporary copy of a repository, confined.

Invariants (``confine.py``, ``limits.py``, ``cgroup.py``, ``reaper.py`` say how each is enforced):
- ``Sandbox.create(repo)`` copies ``repo`` (symlinks kept as links) into a new private temp folder;
  the original is never written. The temp folder itself stays the host's: when commands run as
  another user they own ``repo``, ``home`` and ``tmp`` but cannot rename them or put links in their
  place. The work folder is opened (no link followed) when the sandbox is made and held:
  ``workdir_path`` reaches it through that descriptor and ``workdir_intact()`` says whether the path
  ``workdir`` still names it; host-side code goes through ``workdir_path`` only. Every command starts in that copy (``workdir``) again: a ``cd``
  does not carry over. Commands run one at a time (a lock serialises ``run``).
- The environment of a command is exactly ``minimal_env(home, tmpdir)`` plus ``extra_env`` plus the
  sandbox's marker (``MARKER_VAR``); nothing of the caller's environment leaks in. ``HOME`` and
  ``TMPDIR`` are folders inside the sandbox.
- Past ``timeout`` seconds the command's whole tree is killed (SIGKILL): ``timed_out=True``,
  ``exit_code == TIMEOUT_EXIT_CODE``; ``run`` returns within ``timeout + 2 * KILL_GRACE_S`` plus one
  scan of ``/proc`` (tens of milliseconds in practice), and never raises for a failing command. A
  command killed by signal N exits ``128 + N``.
- Nothing a command starts outlives it: when its shell exits (or times out) every process of the
  command is killed: the PID namespace ends with it, its pids cgroup is emptied, its process group is
  killed, and a scan of ``/proc`` kills what its session or the sandbox's marker names. ``close()``
  does the same for the whole sandbox, removes the cgroups and the folder; idempotent.
- ``output`` is stdout and stderr interleaved as written, UTF-8 (invalid bytes replaced), at most
  ``max_output_chars`` characters (head and tail around an elision marker, ``truncated=True``);
  memory stays bounded whatever the command writes.
- ``enforced()`` says plainly which protections hold for this sandbox on this machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_engine.agent.sandbox.cgroup import CommandCgroups, PidsCgroup
from agent_engine.agent.sandbox.confine import SANDBOX_PATH, Confinement, chown_tree, resolve, tool_path
from agent_engine.agent.sandbox.limits import Limits, count_tasks, prlimit_argv
from agent_engine.agent.sandbox.output import OutputCapture
from agent_engine.agent.sandbox.reaper import MARKER_VAR, make_non_dumpable, reap
from agent_engine.agent.sandbox.stream import drain, pump

__all__ = ["KILL_GRACE_S", "TIMEOUT_EXIT_CODE", "CommandResult", "Sandbox", "minimal_env"]

TIMEOUT_EXIT_CODE = 124  # what coreutils' `timeout` returns
STDIN_MAX_BYTES = 32 << 10  # a command's standard input always fits the pipe: writing it never blocks
KILL_GRACE_S = 0.25


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command (``output_bytes``: everything it wrote, before truncation)."""

    exit_code: int
    output: str
    seconds: float
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0


def minimal_env(home: str | os.PathLike[str], tmpdir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The scrubbed environment of a sandboxed command (nothing from ``os.environ``). No ``.pyc`` is
    written: an agent's same-size edit within the second of an earlier import would run stale bytecode."""
    env = {"PATH": SANDBOX_PATH, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1"}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def _populate(root: Path, repo: str | os.PathLike[str] | None, namespaces: bool) -> Path:
    workdir = root / "repo"
    if repo is None:
        workdir.mkdir()
    else:
        src = Path(repo)
        if not src.is_dir():
            raise ValueError(f"repo {src} is not a folder")
        shutil.copytree(src, workdir, symlinks=True)
    for name in ("home", "tmp") + ((".newroot",) if namespaces else ()):
        (root / name).mkdir()
    return workdir


def _remove_tree(root: Path) -> None:
    def retry(func: Callable[[str], object], path: str, _exc: object) -> None:  # a folder made read-only
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)

    shutil.rmtree(root, onerror=retry)
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class Sandbox:
    """A confined temp copy of a repository in which commands run (see the module docstring)."""

    root: Path
    workdir: Path
    home: Path
    timeout: float = 60.0
    max_output_chars: int = 10000
    extra_env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    confinement: Confinement = field(default_factory=lambda: Confinement(False, False, None, "not requested"))
    cgroups: CommandCgroups | None = None
    sandbox_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    non_dumpable: bool = False
    workdir_fd: int = -1  # the work folder, opened without following links when the sandbox was made
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def create(cls, repo: str | os.PathLike[str] | None, *, timeout: float = 60.0,
               max_output_chars: int = 10000, extra_env: dict[str, str] | None = None,
               prefix: str = "agent-sandbox-", limits: Limits | None = None, isolation: str = "auto",
               allow_network: bool = False, cgroup: bool = True) -> Sandbox:
        """Copy ``repo`` (or start from an empty folder when None) into a new confined temp sandbox.

        ``isolation``: "auto" (namespaces when this machine offers them), "namespaces" (required) or
        "process" (none); ``cgroup=False`` skips the pids cgroups even where they could be made.
        """
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if max_output_chars < 1:
            raise ValueError(f"max_output_chars must be >= 1, got {max_output_chars}")
        limits = limits or Limits()
        confinement = resolve(isolation, allow_network)
        sandbox_id = uuid.uuid4().hex
        root = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            workdir = _populate(root, repo, confinement.namespaces)
            if confinement.run_as is not None:
                _give_rooms(root, confinement.run_as)
            workdir_fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            group = CommandCgroups.create(f"agent-sandbox-{sandbox_id}", limits.max_processes) if cgroup else None
        except BaseException:
            _remove_tree(root)
            raise
        hide_self = not confinement.namespaces and confinement.run_as is None
        non_dumpable = make_non_dumpable() if hide_self else False
        return cls(root, workdir, root / "home", timeout, max_output_chars, dict(extra_env or {}), limits,
                   confinement, group, sandbox_id, non_dumpable, workdir_fd)

    def enforced(self) -> dict[str, bool]:
        """Which protections hold for this sandbox (documented in docs/sandbox.md)."""
        c = self.confinement
        return {
            "scrubbed_environment": True,
            "rlimits": True,
            "process_limit": self.cgroups is not None or c.command_uid != 0,
            "pids_cgroup": self.cgroups is not None,
            "kill_tree_on_exit_and_timeout": True,
            "separate_uid": c.run_as is not None,
            "parent_environ_hidden": c.namespaces or c.run_as is not None or self.non_dumpable,
            "pid_namespace": c.namespaces,
            "read_only_system": c.namespaces,
            "private_tmp": c.namespaces,
            "network_isolated": c.network_isolated,
        }

    @property
    def workdir_path(self) -> Path:
        """The work folder the sandbox made, whatever now stands at ``workdir``: host-side code reads
        and writes the job's files through this path (``/proc/self/fd/N``), never through ``workdir``."""
        if self.workdir_fd < 0:
            raise ValueError("the sandbox holds no work folder descriptor")
        return Path(f"/proc/self/fd/{self.workdir_fd}")

    def workdir_intact(self) -> bool:
        """Whether ``workdir`` is still the folder the sandbox made (not renamed away, not a link)."""
        try:
            now, made = os.lstat(self.workdir), os.fstat(self.workdir_fd)
        except OSError:
            return False
        return stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino)

    def fresh_home(self) -> Path:
        """A new empty home folder for one command (the judge's check: nothing the agent left in
        ``home`` runs there), owned by the commands' user."""
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.root))
        if self.confinement.run_as is not None:
            os.lchown(home, self.confinement.run_as, self.confinement.run_as)
        return home

    def run(self, command: str, *, stdin: bytes | None = None, home: Path | None = None,
            max_output_chars: int | None = None, timeout: float | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in ``workdir``; never raises for a failing command.

        ``stdin``: bytes the command reads on its standard input (at most ``STDIN_MAX_BYTES``; else it
        reads nothing); ``home``: its ``HOME`` instead of the sandbox's; ``max_output_chars``: its output
        bound instead of the sandbox's; ``timeout``: seconds it may run, when fewer than the sandbox's."""
        if stdin is not None and len(stdin) > STDIN_MAX_BYTES:
            raise ValueError(f"stdin holds at most {STDIN_MAX_BYTES} bytes, got {len(stdin)}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        max_chars = self.max_output_chars if max_output_chars is None else max_output_chars
        with self._lock:
            if self._closed:
                raise ValueError("the sandbox is closed")
            start = time.monotonic()
            group = self.cgroups.start() if self.cgroups is not None else None
            try:
                proc = self._spawn(command, group, stdin is not None, home or self.home)
            except OSError as e:
                self._end_group(group)
                return CommandResult(127, f"could not start the command: {e}", time.monotonic() - start)
            if stdin is not None:
                _feed(proc, stdin)
            capture = OutputCapture.for_chars(max_chars)
            fd = proc.stdout.fileno()  # type: ignore[union-attr]
            exited = False
            try:
                exited = pump(proc, fd, capture, start + limit)
            finally:
                self._end_command(proc, fd, capture, group)
            if not exited:
                capture.feed(f"\n[command timed out after {limit:g} s and was killed]\n".encode())
            output, truncated = capture.text(max_chars)
            code = TIMEOUT_EXIT_CODE if not exited else _exit_code(proc.returncode)
            return CommandResult(code, output, time.monotonic() - start, not exited, truncated,
                                 capture.total_bytes)

    def _spawn(self, command: str, group: PidsCgroup | None, piped: bool, home: Path) -> subprocess.Popen[bytes]:
        c, uid = self.confinement, self.confinement.command_uid
        nproc = None if group is not None or uid == 0 else count_tasks(uid) + self.limits.max_processes
        limits = prlimit_argv(tool_path("prlimit"), self.limits, self.timeout, nproc)
        argv = c.argv(command, self.root, self.workdir, limits, group.procs_file if group is not None else None)
        env = {**minimal_env(home, self.root / "tmp"), **self.extra_env, MARKER_VAR: self.sandbox_id}
        return subprocess.Popen(argv, cwd=self.workdir, env=env, stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def _kill_marked(self, sessions: set[int], timeout: float) -> None:
        """Kill every process of the given sessions and every process carrying the sandbox's marker."""
        for sid in sessions:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(sid, signal.SIGKILL)
        reap(self.sandbox_id, sessions, timeout)

    def _end_group(self, group: PidsCgroup | None, timeout: float = KILL_GRACE_S) -> None:
        if group is not None and self.cgroups is not None:
            self.cgroups.finish(group, timeout)

    def _end_command(self, proc: subprocess.Popen[bytes], fd: int, capture: OutputCapture,
                     group: PidsCgroup | None) -> None:
        """Kill the command's whole tree, then read what is left; all within ``2 * KILL_GRACE_S``.

        The leader is not reaped before the kill, so its pid, group and session ids are still its own.
        """
        end_by = time.monotonic() + 2 * KILL_GRACE_S
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the namespace's PID 1 with it, or the command's group
        self._end_group(group, _left(end_by))
        self._kill_marked({proc.pid}, _left(end_by))
        drain(fd, capture, _left(end_by))
        proc.stdout.close()  # type: ignore[union-attr]
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(_left(end_by), 0.05))

    def close(self) -> None:
        """Kill everything the sandbox started, remove its cgroup and its folder (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._kill_marked(set(), KILL_GRACE_S)  # what carries the marker; session ids are stale now
            if self.cgroups is not None:
                self.cgroups.close()
            if self.workdir_fd >= 0:
                os.close(self.workdir_fd)
                self.workdir_fd = -1
            _remove_tree(self.root)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _give_rooms(root: Path, uid: int) -> None:
    """The commands' user owns the work folder, home and tmp (everything below them), never the
    sandbox folder itself: a command cannot rename ``repo`` away or put a link in its place, so the
    path host-side code opens stays the folder the sandbox made. Folders the sandbox made for itself
    (``.newroot``) stay the host's."""
    root.chmod(0o711)  # the commands' user passes through to its rooms; it cannot list or change root
    for name in ("repo", "home", "tmp"):
        chown_tree(root / name, uid)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` to the command's standard input and close it (a command that does not read it
    never blocks the write: the data fits the pipe)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.close()


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _exit_code(returncode: int | None) -> int:
    if returncode is None:  # not reaped within the grace: it was killed
        return 128 + signal.SIGKILL
    return 128 - returncode if returncode < 0 else returncode

