"""Injectable clocks. The scheduler, pin table and estimator read time only through a ``Clock``."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic non-decreasing."""
        ...


class MonotonicClock:
    """Wall clock for serving: ``time.monotonic``."""

    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to: makes TTL tests exact and simulations fast."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self._t += seconds

    def set(self, t: float) -> None:
        if t < self._t:
            raise ValueError("a clock never goes back")
        self._t = float(t)
