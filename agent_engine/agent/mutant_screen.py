"""The sandbox side of the mutants' filter: many mutants screened in one op against the failing tests alone.

``agent_engine.agent.aci.tool_program`` runs this source (after ``repair_tool``'s, before ``repo_tool``'s,
in one namespace); ``repo_tool.main`` answers the ``screen_mutants`` op with ``screen_mutants``. The host
side is ``agent_engine.agent.mutant_trials``. One op per mutant to write it, one to run the failing
tests and one to undo it cost three sandboxed interpreters a mutant; here one interpreter writes each
mutant in turn and forks a child that imports the edited repository afresh (this process never imports
it) and runs the failing tests alone (``repair_tool.failing_outcome``). It needs nothing but the
standard library; importing it runs nothing.

Invariants:
- Each edit (``{"path", "first", "last", "old", "new"}``, as the ``rewrite`` op takes it) is written
  with its undo kept (``repair_tool.rewrite_function``: only while the lines still read ``old`` and the
  result compiles), judged, and undone before the next: after each, the repository reads as before,
  except after the first edit under which the failing tests ran as many tests as on the unedited code
  (``ran``) and none failed, which stays written with its undo kept (the ``undo`` op takes it back)
  and ends the op. An op cut from outside leaves at most one edit written, its undo kept.
- A child runs in its own process group with its output sent to ``/dev/null``; at ``seconds`` it is
  killed with its group (that edit fails), and what its tests left running is killed when it ends; the
  ended processes this one inherited are reaped. A fork that fails fails that edit. After the first
  edit, none is started that could run past ``budget`` seconds from the op's start.
- Prints one JSON object last: ``{"passed": index or null, "tried": edits judged (written or refused),
  "failed_filter": those whose failing tests still failed, ran otherwise or did not finish}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time

if __name__.startswith("agent_engine."):  # on the host; in the sandbox the earlier sources ran here
    from agent_engine.agent.edit_undo import undo_last_edit
    from agent_engine.agent.repair_tool import failing_outcome, rewrite_function

POLL_SECONDS = 0.005  # how often a child is looked at while it runs


def screen_mutants(argv: list[str], failing: list[str], ran: int, edits: list[dict[str, object]], seconds: float,
                   budget: float) -> dict[str, int | None]:
    """Write and judge ``edits`` in order (see the module docstring): an edit passes when the failing
    tests, run alone, run ``ran`` tests (as many as on the unedited code) and none fails; the outcome the
    op prints."""
    started = time.monotonic()
    fixed = {"ran": ran, "failed": 0}
    tried = failed_filter = 0
    for index, edit in enumerate(edits):
        if tried and time.monotonic() - started + seconds > budget:
            break
        tried += 1
        if not _written(edit):
            continue
        outcome = failing_in_child(argv, failing, seconds)
        if outcome == fixed:
            return {"passed": index, "tried": tried, "failed_filter": failed_filter}
        failed_filter += 1
        with contextlib.redirect_stdout(io.StringIO()):
            undo_last_edit()
    return {"passed": None, "tried": tried, "failed_filter": failed_filter}


def _written(edit: dict[str, object]) -> bool:
    """Write one edit quietly (its undo kept); False when it was refused."""
    with contextlib.redirect_stdout(io.StringIO()):
        return rewrite_function(str(edit["path"]), int(str(edit["first"])), int(str(edit["last"])), str(edit["old"]),
                                str(edit["new"])) == 0


def failing_in_child(argv: list[str], failing: list[str], seconds: float) -> dict[str, int] | None:
    """``failing_outcome`` in a forked child of its own process group, killed with its group at
    ``seconds``; None when it did not finish or answered nothing readable."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process left to fork (the sandbox's limit): this edit cannot be judged
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            os.setpgid(0, 0)
            os.write(write_end, json.dumps(failing_outcome(argv, failing)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    finished = _waited(pid, time.monotonic() + seconds)
    data = _written_so_far(read_end) if finished else b""
    os.close(read_end)
    try:
        got = json.loads(data) if data else None
    except ValueError:
        return None
    return got if isinstance(got, dict) and {"ran", "failed"} <= got.keys() else None


def _written_so_far(fd: int) -> bytes:
    """What the pipe holds now, never waiting (a process the tests left behind may still hold its write end)."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _waited(pid: int, deadline: float) -> bool:
    """Wait for the child until ``deadline`` (False past it, when it is killed); then kill what is left of
    its process group (anything the tests started) and reap the child."""
    finished = False
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already: it ended
            done = pid
        if done:
            finished = True
            break
        time.sleep(POLL_SECONDS)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if not finished:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    _reap_orphans()
    return finished


def _reap_orphans() -> None:
    """Reap every ended process this one inherited (as a PID namespace's first process it adopts what the
    tests left behind), so none stays a zombie that counts against the sandbox's process limit."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
