"""OpenMP wait policy for benchmark processes (never for the servers they start: the launcher removes it).

GNU OpenMP threads spin after each parallel region by default. On a machine whose cores are shared
with other work, a spinning thread waits for a descheduled sibling: a [32, 512] x [512, 1408] matmul
on 2 threads measured 16 ms instead of 0.9 ms that way (docs/performance.md). ``PASSIVE`` makes idle
threads sleep. It must be set before torch is imported (libgomp reads it when it loads), so the
benchmarks call :func:`set_passive_wait` first thing; an explicit ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` in the environment wins.
"""

from __future__ import annotations

import os
import sys
import warnings


def set_passive_wait() -> None:
    """Default ``OMP_WAIT_POLICY=PASSIVE`` for this process (warns if torch is loaded); servers started
    through ``agent_engine.server.launcher`` do not inherit it."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    if "torch" in sys.modules:
        warnings.warn("torch was imported before OMP_WAIT_POLICY was set: only child processes get it",
                      stacklevel=2)
