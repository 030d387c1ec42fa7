"""How a command is confined: the exec chain around ``bash -c COMMAND``, and the probe of what this machine offers.

The chain (each step execs the next, so the command keeps the pid and the session that ``Popen`` gave
it, and no Python code runs in the child):

1. ``bash -c JOIN``: joins the sandbox's pids cgroup before anything forks (only when there is one).
2. ``prlimit``: the per-command limits (``limits.py``).
3. ``setpriv --reuid/--regid/--clear-groups``: when the agent runs as root, commands run as the
   unprivileged ``SANDBOX_UID`` (nobody): root's files and the agent's ``/proc/<pid>/environ`` are not
   theirs to read, and RLIMIT_NPROC applies to them (it never applies to uid 0).
4. Namespaces mode only: ``unshare --user --map-root-user --mount --pid --fork --kill-child
   --mount-proc [--net]`` runs ``SETUP`` as PID 1 of a new PID namespace and root of a new user
   namespace. ``SETUP`` binds ``/`` recursively read-only, mounts private tmpfs on ``/tmp``,
   ``/dev/shm`` and the sandbox's parent folder (other sandboxes are hidden), binds the sandbox folder
   writable at its own path, brings up the loopback of the new network namespace, ``pivot_root``s into
   that tree and detaches the old root.
5. ``setpriv --no-new-privs`` (in namespaces mode also without any capability, so nothing can be
   remounted writable), then ``bash -c COMMAND`` in the work folder.

Invariants:
- Namespaces mode: the command's bash is PID 1 of its namespace; when it exits, or when ``unshare``
  dies (``--kill-child``), the kernel kills every process of the namespace. The only writable places
  are the sandbox folder and the private tmpfs; without ``network`` the command has its own network
  namespace with only a loopback (the host's 127.0.0.1 is not reachable). A setup failure exits 125
  with a ``sandbox:`` line on stderr.
- ``resolve`` decides once per sandbox: ``"namespaces"`` requires them (ValueError naming the reason
  when the probe fails), ``"process"`` never uses them, ``"auto"`` uses them when the probe passes.
  The probe runs the real chain once per process (cached) and checks that the work folder is writable
  and a folder next to the sandbox is not.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ISOLATION_MODES", "SANDBOX_PATH", "SANDBOX_UID", "Confinement", "chown_tree", "resolve", "tool_path"]

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_UID = 65534  # nobody / nogroup
ISOLATION_MODES = ("auto", "namespaces", "process")
TMPFS_SIZE = "512m"
PROBE_TIMEOUT_S = 15.0

JOIN = 'echo $$ > "$1" || { echo "sandbox: cannot join the pids cgroup" >&2; exit 125; }; shift; exec "$@"'

SETUP = r"""
set -eE -o pipefail
trap 'echo "sandbox: confinement setup failed at line $LINENO" >&2; exit 125' ERR
R=$1 W=$2 NETNS=$3; shift 3
N=$R/.newroot
mount --rbind / "$N"
findmnt -R -n -r -o TARGET "$N" | while read -r m; do printf -v m '%b' "$m"; mount -o remount,bind,ro "$m"; done
hide=(/tmp /dev/shm)
P=${R%/*}
case "$P" in ""|/|/tmp|/dev/shm) ;; *) hide+=("$P") ;; esac
for d in "${hide[@]}"; do
  if [ -d "$N$d" ]; then mount -t tmpfs -o mode=1777,size=__TMPFS_SIZE__ tmpfs "$N$d"; fi
done
mkdir -p "$N$R"
mount --bind "$R" "$N$R"
if [ "$NETNS" = 1 ] && command -v ip >/dev/null; then ip link set lo up; fi
cd "$N"
mkdir -p tmp/.oldroot
pivot_root . tmp/.oldroot
umount -l /tmp/.oldroot
rmdir /tmp/.oldroot
cd "$W"
unset OLDPWD
exec "$@"
""".replace("__TMPFS_SIZE__", TMPFS_SIZE)

_REQUIRED = ("bash", "prlimit", "setpriv")
_NAMESPACE_TOOLS = ("unshare", "mount", "findmnt", "pivot_root", "umount")


@functools.cache
def _tool(name: str) -> str | None:
    return shutil.which(name, path=SANDBOX_PATH)


def tool_path(name: str) -> str:
    """The absolute path of a helper program on ``SANDBOX_PATH``; ValueError when it is missing."""
    return _tools((name,))[name]


def _tools(names: tuple[str, ...]) -> dict[str, str]:
    missing = [n for n in names if _tool(n) is None]
    if missing:
        raise ValueError(f"the sandbox needs {', '.join(missing)} (util-linux) on {SANDBOX_PATH}")
    return {n: str(_tool(n)) for n in names}


@dataclass(frozen=True)
class Confinement:
    """What a sandbox's commands run under (see the module docstring)."""

    namespaces: bool
    network_isolated: bool
    run_as: int | None  # uid (and gid) of the commands; None: the agent's own
    namespace_error: str | None = None  # why namespaces are not used, when they are not

    @property
    def command_uid(self) -> int:
        """The real uid the commands run as: ``run_as``, else the agent's own."""
        return self.run_as if self.run_as is not None else os.getuid()

    def argv(self, command: str, root: Path, workdir: Path, limits_argv: list[str],
             cgroup_procs: Path | None) -> list[str]:
        """The whole exec chain that runs ``command`` (steps 1-5 of the module docstring)."""
        t = _tools(_REQUIRED + (_NAMESPACE_TOOLS if self.namespaces else ()))
        argv = [t["bash"], "-c", JOIN, "sandbox-join", str(cgroup_procs)] if cgroup_procs else []
        argv += limits_argv
        if self.run_as is not None:
            argv += [t["setpriv"], f"--reuid={self.run_as}", f"--regid={self.run_as}", "--clear-groups"]
            if not self.namespaces:  # this is the last step: drop everything here
                argv += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
            argv += ["--"]
        if self.namespaces:
            argv += [t["unshare"], "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child",
                     "--mount-proc", *(["--net"] if self.network_isolated else []), "--",
                     t["bash"], "-c", SETUP, "sandbox-setup", str(root), str(workdir),
                     "1" if self.network_isolated else "0",
                     t["setpriv"], "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
        elif self.run_as is None:
            argv += [t["setpriv"], "--no-new-privs", "--"]
        return [*argv, t["bash"], "-c", command]


def chown_tree(path: Path, uid: int) -> None:
    """Give ``path`` and everything below it (links themselves, not their targets) to ``uid``."""
    os.lchown(path, uid, uid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def _run_as() -> int | None:
    return SANDBOX_UID if os.geteuid() == 0 else None


@functools.cache
def _probe(run_as: int | None) -> str | None:
    """None when namespaces mode works here, else why not (runs the real chain once)."""
    try:
        _tools(_REQUIRED + _NAMESPACE_TOOLS)
    except ValueError as e:
        return str(e)
    root = Path(tempfile.mkdtemp(prefix="agent-sandbox-probe-"))  # where sandboxes go: same mounts
    outside = Path(tempfile.mkdtemp(prefix="agent-sandbox-probe-outside-"))
    try:
        for d in (root / "repo", root / ".newroot"):
            d.mkdir()
        outside.chmod(0o777)
        if run_as is not None:  # the sandbox's own layout: the folder the host's, the work folder theirs
            root.chmod(0o711)
            chown_tree(root / "repo", run_as)
        check = f"touch ok && ! touch {outside}/escaped 2>/dev/null && test ! -e /proc/$PPID/environ"
        argv = Confinement(True, True, run_as).argv(check, root, root / "repo", [], None)
        res = subprocess.run(argv, cwd=root, env={"PATH": SANDBOX_PATH}, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
        if res.returncode != 0 or not (root / "repo" / "ok").exists():
            return f"probe exited {res.returncode}: {res.stderr.decode(errors='replace').strip()[-300:]}"
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return f"probe failed: {e}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def resolve(mode: str, allow_network: bool) -> Confinement:
    """The confinement for a new sandbox (see the module docstring); ValueError on a bad ``mode``."""
    if mode not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATION_MODES)}, got {mode!r}")
    _tools(_REQUIRED)
    run_as = _run_as()
    error = "not requested" if mode == "process" else _probe(run_as)
    if error is not None and mode == "namespaces":
        raise ValueError(f"namespaces are not available here: {error}")
    namespaces = error is None
    return Confinement(namespaces, namespaces and not allow_network, run_as, error)
