"""How the engine's OpenMP threads wait between parallel regions: a bounded spin, then sleep.

A decode step runs about a hundred short parallel regions (one per fused matmul, norm and attention
call). libgomp's default lets idle threads spin for up to ~300,000 iterations (far longer under
``OMP_WAIT_POLICY=ACTIVE``), which is fastest on an idle machine and ruinous on a busy one: a spinning
thread waits for a sibling the OS has descheduled, and an agent's own tool calls (tests, builds) run
on the same cores as the engine. ``GOMP_SPINCOUNT=20000`` (tens of microseconds) keeps the regions of
one step back to back and lets threads sleep when the cores are wanted elsewhere: measured on a 2-core
AMD EPYC (AVX-512) with other work running, the 1.5B model's decode went from 12.7 to 32.7 tokens/s
at one stream and 7.5 to 72.8 at eight (docs/performance.md).

Invariants:
- :func:`default_bounded_spin` only fills in a default: an ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
  the user set wins, and so does an ``AGENT_ENGINE_OMP_SPIN=default`` opt-out.
- libgomp reads the setting once, when torch loads it: the package calls this on import, before
  anything imports torch. Servers started through ``agent_engine.server.launcher`` do not inherit the
  caller's setting (peers run as their users run them); ours set it again on their own import.
"""

from __future__ import annotations

import os

SPIN_COUNT = "20000"
OPT_OUT = "AGENT_ENGINE_OMP_SPIN"  # "default": leave libgomp's own wait policy


def default_bounded_spin() -> None:
    """Set ``GOMP_SPINCOUNT`` for this process unless a wait policy is already chosen (see above)."""
    if os.environ.get(OPT_OUT) == "default":
        return
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
