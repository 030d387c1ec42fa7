"""Judging a job: the task's check always runs on its pristine check files, whatever the agent did to them.

A model that cannot fix the code may "fix" the check instead (``sys.exit(0)`` at the top of
``check.py``, a deleted test folder). The check files are therefore read-only in the job's copy of
the repository (a signal: ``edit_file`` refuses them and says why) and, before the check runs, put
back from the pristine task repository (the guarantee).

Invariants:
- ``check_paths(task)`` is the task's ``check_files`` when it names them, else the repository file its
  check command runs: the program itself (``./check.sh``) or an interpreter's script (``python3
  check.py`` -> ``check.py``); empty for any other command, and without a repository or a check.
  Every path is relative, normalized and inside the repository (``ValueError`` otherwise).
- ``protect(workdir, paths)`` removes the write bits of every check file (the files below a check
  folder too; folders stay writable, so a test run may still write its caches).
- ``restore(pristine, workdir, paths, uid)`` replaces each path in ``workdir`` by its pristine copy:
  whatever stands there now (an edited file, a link, a folder where a file was, nothing) is removed
  first, and no link in ``workdir`` is followed, on the path or on its parent folders; the copies (and
  any folder made for them) are owned by ``uid`` when given. Editing, deleting or replacing a check
  file therefore never counts as solved.
- ``judge(sandbox, task)`` restores, then runs the check in the job's own sandbox: True exactly when
  it exits 0, None for a task without a check. The sandbox's commands have all ended by then (every
  command's processes die with it), so nothing of the agent's can touch the files after the restore.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.sandbox.confine import chown_tree
from agent_engine.agent.task_set import AgentTask

__all__ = ["INTERPRETERS", "check_paths", "judge", "protect", "restore"]

INTERPRETERS = re.compile(r"python[0-9.]*|bash|sh|node|ruby|perl")


def _relative(path: str) -> str:
    """``path`` normalized; ValueError when it is absolute or leaves the repository."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts or str(p) == ".":
        raise ValueError(f"check path {path!r} must be a relative path inside the repository")
    return str(p)


def check_paths(task: AgentTask) -> tuple[str, ...]:
    """The repository paths that make up ``task``'s check (see the module docstring)."""
    if task.check_files is not None:
        return tuple(_relative(p) for p in task.check_files)
    if task.repo is None or task.check is None:
        return ()
    try:
        words = shlex.split(task.check)
    except ValueError:
        return ()
    script = _script_of(words, Path(task.repo))
    return () if script is None else (script,)


def _script_of(words: list[str], repo: Path) -> str | None:
    """The repository file a command runs: its program (``./check.sh``), or the first argument of an
    interpreter (``python3 check.py``, ``bash run.sh``); None for anything else."""
    if not words:
        return None
    if "/" in words[0]:
        candidates = words[:1]
    elif INTERPRETERS.fullmatch(os.path.basename(words[0])):
        candidates = [w for w in words[1:] if not w.startswith("-")][:1]
    else:
        return None
    for word in candidates:
        try:
            rel = _relative(word)
        except ValueError:
            return None
        if (repo / rel).is_file():
            return rel
    return None


def _files_below(path: Path) -> Iterable[Path]:
    if path.is_symlink() or not path.is_dir():
        yield path
        return
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            yield Path(dirpath, name)


def protect(workdir: str | os.PathLike[str], paths: Iterable[str]) -> None:
    """Make the check files under ``workdir`` read-only (links are left alone)."""
    for rel in paths:
        for f in _files_below(Path(workdir) / _relative(rel)):
            st = f.lstat() if os.path.lexists(f) else None
            if st is not None and stat.S_ISREG(st.st_mode):
                f.chmod(stat.S_IMODE(st.st_mode) & ~0o222)


def _remove(path: Path) -> None:
    """Remove whatever stands at ``path`` (a link itself, never its target)."""
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _real_folder(path: Path, uid: int | None) -> None:
    """Make ``path`` a real folder (not a link, not a file), keeping one that already is."""
    if path.is_dir() and not path.is_symlink():
        return
    _remove(path)
    path.mkdir()
    if uid is not None:
        os.lchown(path, uid, uid)


def restore(pristine: str | os.PathLike[str], workdir: str | os.PathLike[str], paths: Iterable[str],
            uid: int | None = None) -> None:
    """Put the pristine copy of each check path back into ``workdir`` (see the module docstring)."""
    root = Path(workdir)
    for rel in paths:
        parts = PurePosixPath(_relative(rel)).parts
        here = root
        for part in parts[:-1]:
            here = here / part
            _real_folder(here, uid)
        target, source = here / parts[-1], Path(pristine) / rel
        _remove(target)
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, target, symlinks=True)
        elif os.path.lexists(source):
            shutil.copy2(source, target, follow_symlinks=False)
        else:
            continue  # not in the pristine repository either: nothing to restore
        if uid is not None and target.is_symlink():
            os.lchown(target, uid, uid)
        elif uid is not None:
            chown_tree(target, uid)


def judge(sandbox: Sandbox, task: AgentTask) -> bool | None:
    """Whether ``task``'s check passes in ``sandbox`` on its pristine check files (None without a check)."""
    if task.check is None:
        return None
    if task.repo is not None:
        restore(task.repo, sandbox.workdir, check_paths(task), sandbox.confinement.run_as)
    return sandbox.run(task.check).exit_code == 0
