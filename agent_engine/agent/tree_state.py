"""``tree_state``: a digest of a job's repository, read on the host without trusting anything in it.

The agent's commands may have left anything in the work folder: links to ``/`` or ``/proc``, FIFOs,
device nodes, a million files. The digest is read by the host (as root, when the commands run as
another user), so:

Invariants:
- No link is followed: the folder itself is opened with ``O_NOFOLLOW`` (a link there digests as
  ``NOT_A_FOLDER``) or given as a descriptor, the walk goes by descriptors (``os.fwalk``) and every file is opened relative to
  its folder's descriptor with ``O_NOFOLLOW | O_NONBLOCK``; only regular files are read (``fstat`` on
  the opened descriptor), so a FIFO or a device never blocks a read.
- Bounded: at most ``max_entries`` paths, ``max_bytes`` bytes of content (past that, a file's
  modification time stands in for it) and ``max_seconds`` of walking; past a bound the digest covers
  what was seen, in the walk's sorted order.
- Equal digests mean no path was added, removed, changed kind, mode or content (within the bounds);
  rewriting a file with the same bytes changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time

__all__ = ["NOT_A_FOLDER", "STATE_MAX_BYTES", "STATE_MAX_ENTRIES", "STATE_MAX_SECONDS", "tree_state"]

STATE_MAX_ENTRIES = 20000  # paths digested, at most (a huge tree then reads as unchanged past that point)
STATE_MAX_BYTES = 16 << 20  # bytes of content read, at most
STATE_MAX_SECONDS = 5.0  # time spent walking, at most
NOT_A_FOLDER = "not-a-folder"
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def tree_state(root: str | os.PathLike[str] | int, max_entries: int = STATE_MAX_ENTRIES,
               max_bytes: int = STATE_MAX_BYTES, max_seconds: float = STATE_MAX_SECONDS) -> str:
    """The digest of the tree under ``root``: a path, or a folder's open descriptor (a sandbox's
    ``workdir_fd``: the folder it made, whatever stands at its path now; see the module docstring)."""
    try:
        top = os.dup(root) if isinstance(root, int) else os.open(root, _OPEN_DIR)
        if isinstance(root, int) and not stat.S_ISDIR(os.fstat(top).st_mode):
            os.close(top)
            return NOT_A_FOLDER
    except OSError:
        return NOT_A_FOLDER
    digest = hashlib.blake2b(digest_size=16)
    seen, budget = 0, [max_bytes]
    deadline = time.monotonic() + max_seconds
    try:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                entry = _entry(name, dir_fd, budget)
                if entry is None:
                    continue
                rel = os.path.normpath(os.path.join(dirpath, name))
                mode, size, content = entry
                digest.update(f"{rel}\0{mode}\0{size}\0".encode(errors="replace"))
                digest.update(hashlib.blake2b(content, digest_size=16).digest())
                seen += 1
                if seen >= max_entries or time.monotonic() > deadline:
                    return digest.hexdigest()
    finally:
        os.close(top)
    return digest.hexdigest()


def _entry(name: str, dir_fd: int, budget: list[int]) -> tuple[int, int, bytes] | None:
    """``(mode, size, content)`` of one entry; content is the bytes of a regular file within the byte
    budget, else its modification time, else empty. None when it vanished or cannot be read."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return st.st_mode, st.st_size, b""
    if st.st_size > budget[0]:
        return st.st_mode, st.st_size, str(st.st_mtime_ns).encode()
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError:  # not ours to read, or replaced by a link meanwhile
        return st.st_mode, st.st_size, str(st.st_mtime_ns).encode()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return st.st_mode, st.st_size, b""
        content = _read_at_most(fd, budget[0])
    finally:
        os.close(fd)
    budget[0] -= len(content)
    return st.st_mode, st.st_size, content


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
