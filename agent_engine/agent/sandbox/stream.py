"""Read a running command's output without ever blocking past its deadline.

Invariants:
- ``pump`` returns as soon as the process exits (True) or the deadline passes (False), whichever
  comes first, within ``POLL_S``. It never reaps the process (``waitid`` with ``WNOWAIT``): until the
  caller does, its pid, process group and session id cannot be reused, so killing them by number is
  safe. it reads at most ``CHUNK`` bytes at a time into the bounded
  ``OutputCapture``, so memory stays bounded however fast the command writes. A closed pipe does not
  end the wait: a command may close its output and go on running.
- ``drain`` reads what is left (the pipe after the process tree was killed) until end of file or its
  own deadline, so a descendant that escaped the kill and holds the pipe costs at most that grace.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time

from agent_engine.agent.sandbox.output import OutputCapture

__all__ = ["CHUNK", "POLL_S", "drain", "exited", "pump"]

POLL_S = 0.05
CHUNK = 1 << 16


def _read(fd: int, capture: OutputCapture) -> bool:
    """One read into ``capture``; False at end of file."""
    try:
        data = os.read(fd, CHUNK)
    except BlockingIOError:
        return True
    if not data:
        return False
    capture.feed(data)
    return True


def exited(pid: int) -> bool:
    """True once child ``pid`` has ended; it stays unreaped (a zombie) for the caller to reap."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True


def pump(proc: subprocess.Popen[bytes], fd: int, capture: OutputCapture, deadline: float) -> bool:
    """Stream ``fd`` into ``capture`` until ``proc`` exits (True) or ``deadline`` passes (False)."""
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        is_open = True
        while not exited(proc.pid):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not is_open:
                time.sleep(min(left, POLL_S))
            elif sel.select(min(left, POLL_S)) and not _read(fd, capture):
                is_open = False
                sel.unregister(fd)
        return True


def drain(fd: int, capture: OutputCapture, grace: float) -> None:
    """Read ``fd`` into ``capture`` until end of file or ``grace`` seconds have passed."""
    os.set_blocking(fd, False)
    deadline = time.monotonic() + grace
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if sel.select(left) and not _read(fd, capture):
                return
