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
- ``judge(sandbox, task)`` is SWE-bench's rule: "solved" means the task's tests ran and passed, never
  an exit status alone. It returns a ``Verdict`` (``solved`` None for a task without a check) after:
  1. checking that the sandbox's work folder is the one it made (``Sandbox.workdir_intact``; every
     host-side step goes through the descriptor held since then, ``workdir_path``, never a path the
     agent could have renamed or linked);
  2. restoring the check files there;
  3. removing every ``__pycache__`` and ``.pyc`` of the repository, inside the sandbox;
  4. running the check inside the sandbox, with a fresh ``HOME``, through ``check_runner`` (``python3
     -I -B``: no user site, no ``PYTHON*`` variables, no bytecode read from the repository) whenever
     the check is Python: a ``tests`` task runs its test paths, a ``python3 SCRIPT`` or ``python3 -m
     MODULE`` check runs as itself. The runner's report carries a nonce only the judge and the runner
     know: no report, a ``SystemExit`` raised by the code under test, a changed test machinery, a
     failing or missing test (``fail_to_pass`` + ``pass_to_pass``), or no test at all in a ``tests``
     task, is not solved. Any other check command is judged by its exit status (``Verdict.how`` says
     ``exit-status``), still with steps 1-3 and a fresh home.
  The sandbox's commands have all ended by then (every command's processes die with it), so nothing
  of the agent's runs while the judge does.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import secrets
import shlex
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from agent_engine.agent import check_runner
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.sandbox.confine import chown_tree
from agent_engine.agent.task_set import AgentTask

__all__ = ["INTERPRETERS", "Verdict", "check_paths", "judge", "protect", "restore"]

INTERPRETERS = re.compile(r"python[0-9.]*|bash|sh|node|ruby|perl")
PYTHON = re.compile(r"python3?(\.[0-9]+)?")
RUNNER_SOURCE = inspect.getsource(check_runner)
REPORT_CHARS = 200_000  # output kept from a judged run: the report, written last, always fits its tail
CLEAN_BYTECODE = ("find . \\( -name __pycache__ -type d -prune -exec rm -rf {} + \\) "
                  "-o \\( -name '*.py[co]' -type f -exec rm -f {} + \\)")
NATIVE_SUFFIXES = (".so", ".pyd")


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




@dataclass(frozen=True)
class Verdict:
    """How a job was judged: ``solved`` (None: the task has no check), why, how (``tests``, ``script``,
    ``exit-status`` or ``none``), the runner's per-outcome test counts and the first failing ids."""

    solved: bool | None
    reason: str
    how: str = "none"
    counts: dict[str, int] = field(default_factory=dict)
    failing: tuple[str, ...] = ()


def judge(sandbox: Sandbox, task: AgentTask) -> Verdict:
    """Whether ``task`` is solved in ``sandbox`` (see the module docstring)."""
    if task.check is None and task.tests is None:
        return Verdict(None, "the task has no check")
    if not sandbox.workdir_intact():
        return Verdict(False, "the work folder was renamed or replaced during the job")
    if task.repo is not None:
        restore(task.repo, sandbox.workdir_path, check_paths(task), sandbox.confinement.run_as)
    sandbox.run(CLEAN_BYTECODE)
    plan = _runner_request(task)
    if plan is None:
        done = sandbox.run(str(task.check), home=sandbox.fresh_home())
        return Verdict(done.exit_code == 0, f"the check exited {done.exit_code}", "exit-status")
    interpreter, request = plan
    nonce = secrets.token_hex(16)
    request["nonce"] = nonce
    request["native"] = task.repo is not None and _has_native(Path(task.repo))
    command = (f"{interpreter} -I -B -c {shlex.quote(RUNNER_SOURCE)} {check_runner.JUDGE_FLAG}")
    done = sandbox.run(command, stdin=(json.dumps(request) + "\n").encode(), home=sandbox.fresh_home(),
                       max_output_chars=REPORT_CHARS)
    report = _report(done.output, nonce)
    how = str(request["mode"])
    if report is None:
        why = "timed out" if done.timed_out else f"exited {done.exit_code}"
        return Verdict(False, f"the check did not run to its end ({why}, no report)", how)
    return _decide(report, how)


def _runner_request(task: AgentTask) -> tuple[str, dict[str, object]] | None:
    """The interpreter and the runner's request for ``task``, or None when its check is not Python."""
    files = list(check_paths(task))
    must_pass = list(task.fail_to_pass) + list(task.pass_to_pass)
    if task.tests is not None:
        return "python3", {"mode": "tests", "paths": [_relative(p) for p in task.tests],
                           "check_files": files, "must_pass": must_pass}
    try:
        words = shlex.split(str(task.check))
    except ValueError:
        return None
    if not words or not PYTHON.fullmatch(os.path.basename(words[0])) or "/" in words[0]:
        return None
    args = [w for w in words[1:] if w not in ("-B", "-I", "-E", "-s", "-S", "-u")]
    if not args or (args[0].startswith("-") and args[0] != "-m") or (args[0] == "-m" and len(args) < 2):
        return None
    if args[0] != "-m":
        try:
            args[0] = _relative(args[0])
        except ValueError:
            return None
    return words[0], {"mode": "script", "argv": args, "check_files": files, "must_pass": must_pass}


def _has_native(repo: Path) -> bool:
    """Whether the pristine repository holds extension modules (its own, so the runner may load them)."""
    return any(name.endswith(NATIVE_SUFFIXES) for _, _, names in os.walk(repo) for name in names)


def _report(output: str, nonce: str) -> dict[str, object] | None:
    """The runner's report in ``output`` (the last line that carries ``nonce``), or None."""
    mark = check_runner.REPORT_MARK + nonce + " "
    at = output.rfind(mark)
    if at < 0:
        return None
    line = output[at + len(mark):].split("\n", 1)[0]
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _decide(report: dict[str, object], how: str) -> Verdict:
    """The verdict from a genuine report (see the module docstring)."""
    counts = {str(k): int(v) for k, v in dict(report.get("counts") or {}).items()}  # type: ignore[call-overload]
    failing = tuple(str(t) for t in list(report.get("failing") or []))  # type: ignore[call-overload]
    def verdict(solved: bool, reason: str) -> Verdict:
        return Verdict(solved, reason, how, counts, failing)
    if report.get("tampered"):
        return verdict(False, f"the test machinery was changed while the check ran: {report['tampered']}")
    if report.get("exit_from") == "repository":
        return verdict(False, "the code under test ended the check (SystemExit)")
    if report.get("exit") not in (0, None):
        return verdict(False, f"the check exited {report.get('exit')}" + (f": {report['error']}" if report.get("error") else ""))
    if report.get("n_broken_files"):
        return verdict(False, f"{report['n_broken_files']} test files could not be imported: {report.get('broken_files')}")
    if failing:
        return verdict(False, f"{len(failing)}+ tests failed: {', '.join(failing[:5])}")
    if report.get("n_must_pass_missing"):
        return verdict(False, f"{report['n_must_pass_missing']} named tests did not pass: {report.get('must_pass_missing')}")
    if how == "tests" and counts.get("passed", 0) == 0:
        return verdict(False, "no test ran")
    ran = sum(counts.values())
    return verdict(True, f"{ran} tests ran and passed" if ran else "the check ran to its end and exited 0")
