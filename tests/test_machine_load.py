"""The load monitor benchmarks use to say whether a run was quiet: other processes' CPU is counted,
this process tree's own is not.

The accounting is checked on a fake ``/proc`` whose counters the test advances itself, so nothing
else the machine runs can change the outcome; one test reads the real ``/proc`` and asserts only
what holds however busy the machine is."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent_engine.machine_load import QUIET_OTHER_CORES, LoadMonitor, wait_until_idle

pytestmark = pytest.mark.core

TICK = os.sysconf("SC_CLK_TCK")
ME = os.getpid()
CHILD, OTHER = 2_000_001, 2_000_002  # above any pid_max: never a real process


class FakeProc:
    """A ``/proc`` with a load average, the machine's CPU line and three processes: this one, a child
    of it and an unrelated one. Counters are in clock ticks, as the kernel writes them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.busy = self.steal = self.idle = 0
        self.cpu = {ME: 0, CHILD: 0, OTHER: 0}
        (root / "loadavg").write_text("0.42 0.40 0.38 1/100 12345\n")
        self.write()

    def write(self) -> None:
        # user nice system idle iowait irq softirq steal
        (self.root / "stat").write_text(f"cpu  {self.busy} 0 0 {self.idle} 0 0 0 {self.steal}\ncpu0 0\n")
        parents = {ME: 1, CHILD: ME, OTHER: 1}
        for pid, ticks in self.cpu.items():
            (self.root / str(pid)).mkdir(exist_ok=True)
            # after "(comm)": state, ppid, then 9 fields, then utime (f[11]) and stime (f[12])
            rest = ["S", str(parents[pid])] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 5
            (self.root / str(pid) / "stat").write_text(f"{pid} (py thon) {' '.join(rest)}\n")

    def run(self, pid: int, ticks: int) -> None:
        """``pid`` used ``ticks`` of CPU (so did the machine)."""
        self.cpu[pid] += ticks
        self.busy += ticks
        self.write()


def _measure(fake: FakeProc, work: dict[int, int], steal: int = 0, idle: int = 0) -> LoadMonitor:
    monitor = LoadMonitor(interval=3600.0, proc=fake.root).start()  # samples only at start and stop
    for pid, ticks in work.items():
        fake.run(pid, ticks)
    fake.steal += steal
    fake.idle += idle
    fake.write()
    monitor.stop()
    return monitor


def test_own_tree_is_not_load(tmp_path: Path) -> None:
    fake = FakeProc(tmp_path)
    report = _measure(fake, {ME: 5 * TICK, CHILD: 3 * TICK}).report
    assert report is not None and report.load1_before == 0.42
    assert report.other_cores == 0.0 and report.steal_pct == 0.0
    assert report.noisy is False and report.label().startswith("quiet")


def test_another_process_is_load(tmp_path: Path) -> None:
    fake = FakeProc(tmp_path)
    report = _measure(fake, {ME: 2 * TICK, OTHER: 4 * TICK}).report
    assert report is not None and report.other_cores is not None
    # exactly the other process's 4 CPU seconds, spread over the run's wall time
    assert report.other_cores * report.seconds == pytest.approx(4.0)
    assert report.other_cores > QUIET_OTHER_CORES and report.noisy is True
    assert report.as_dict()["noisy"] is True and report.label().startswith("NOISY")


def test_steal_makes_a_run_noisy(tmp_path: Path) -> None:
    fake = FakeProc(tmp_path)
    report = _measure(fake, {ME: 90}, steal=10, idle=10).report  # 10 of 100 ticks
    assert report is not None and report.other_cores == 0.0
    assert report.steal_pct == pytest.approx(10.0) and report.noisy is True


def test_a_child_that_ended_stays_ours(tmp_path: Path) -> None:
    """A child's CPU counts as ours up to its last sample even once it is gone (killed with its tree)."""
    fake = FakeProc(tmp_path)
    monitor = LoadMonitor(interval=3600.0, proc=fake.root).start()
    fake.run(CHILD, 3 * TICK)
    monitor._sample()  # what the sampling thread does every ``interval``
    del fake.cpu[CHILD]
    for entry in (tmp_path / str(CHILD)).iterdir():
        entry.unlink()
    (tmp_path / str(CHILD)).rmdir()
    fake.write()
    report = monitor.stop()
    assert report.other_cores == 0.0


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux /proc only")
def test_real_proc_report_is_complete() -> None:
    """On the real machine: every figure is measured (how large ``other_cores`` is depends on what else
    runs, so only its sign is asserted)."""
    with LoadMonitor() as monitor:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
    report = monitor.report
    assert report is not None and report.load1_before is not None and report.seconds >= 0.3
    assert report.other_cores is not None and report.other_cores >= 0.0
    assert report.steal_pct is not None and report.noisy in (True, False)


def test_waiting_until_a_spinning_server_is_idle(tmp_path: Path) -> None:
    """A child that keeps a core busy for three windows after its burst: the wait ends in the first
    window it is quiet; a process outside the trees is not waited for; a tree that never quiets is
    waited for until the timeout."""
    fake = FakeProc(tmp_path)
    windows: list[float] = []

    def spin_three(seconds: float) -> None:
        windows.append(seconds)
        fake.run(OTHER, TICK)  # never waited for
        if len(windows) <= 3:
            fake.run(CHILD, TICK // 4)  # one core for the quarter second

    assert wait_until_idle([CHILD], proc=fake.root, sleep=spin_three) == pytest.approx(1.0)
    assert len(windows) == 4

    def spin_forever(seconds: float) -> None:
        fake.run(CHILD, TICK // 4)

    assert wait_until_idle([CHILD], timeout=2.0, proc=fake.root, sleep=spin_forever) == pytest.approx(2.0)
    assert wait_until_idle([999_999_999], proc=fake.root, sleep=lambda s: None) == pytest.approx(0.25)
