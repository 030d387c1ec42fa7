"""Task repositories shipped as archives: a published library's code is data to this project.

A task line's ``repo`` may name a ``.tar.gz`` (the ``libraries`` set: each a library's package and
tests as published, one bug injected). ``unpacked_repo`` gives the folder a job's sandbox copies.

Invariants:
- The archive is unpacked once per content into ``cache_root()/tasks/NAME-SHA``: into a temporary
  folder beside it, then renamed, so the cache never holds a half-unpacked repository; an entry that
  already stands is used as it is.
- Members are extracted with ``tarfile``'s ``data`` filter: no absolute path, no ``..``, no link out
  of the folder, no device (ValueError otherwise).
- The archive holds exactly one top folder. Its ``check.py`` is the judge's runner
  (``agent_engine.agent.check_runner``) written at unpack time, so every library task checks with
  the same runner, and the cache key covers the runner too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from agent_engine.agent import check_runner
from agent_engine.paths import cache_root

__all__ = ["ARCHIVE_SUFFIX", "unpacked_repo"]

ARCHIVE_SUFFIX = ".tar.gz"
RUNNER_PATH = Path(check_runner.__file__)


def unpacked_repo(archive: Path) -> Path:
    """The repository folder of ``archive`` (see the module docstring)."""
    runner = RUNNER_PATH.read_bytes()
    digest = hashlib.sha256(archive.read_bytes() + runner).hexdigest()[:12]
    name = archive.name[: -len(ARCHIVE_SUFFIX)]
    target = cache_root() / "tasks" / f"{name}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        with tarfile.open(archive, "r:gz") as tf:
            tf.extractall(scratch, filter="data")
        tops = list(scratch.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise ValueError(f"task archive {archive} must hold exactly one folder")
        (tops[0] / "check.py").write_bytes(runner)
        try:
            os.rename(tops[0], target)
        except OSError:  # another process unpacked it first
            if not target.is_dir():
                raise
    except tarfile.TarError as e:
        raise ValueError(f"task archive {archive} cannot be unpacked: {e}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
