"""The load monitor benchmarks use to say whether a run was quiet: other processes' CPU is counted,
this process tree's own is not."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_engine.machine_load import LoadMonitor

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux /proc only")

# A grandchild that outlives its parent is re-parented away from this process: "another process".
_ORPHAN_SPINNER = """
import os, time
if os.fork() == 0:
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        pass
    os._exit(0)
"""


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_own_work_is_not_load_but_another_process_is():
    with LoadMonitor() as own:
        _spin(0.8)
    report = own.report
    assert report is not None and report.load1_before is not None and report.seconds >= 0.8
    assert report.other_cores is not None and report.other_cores < 0.6  # our own spinning core is ours

    subprocess.run([sys.executable, "-c", _ORPHAN_SPINNER], check=True)
    time.sleep(0.2)
    with LoadMonitor() as busy:
        time.sleep(1.5)
    assert busy.report.other_cores > 0.6 and busy.report.noisy
    assert busy.report.as_dict()["noisy"] is True and busy.report.label().startswith("NOISY")
