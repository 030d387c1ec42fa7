"""Measured tool durations: per-tool history, their distributions, eta and the unpinned queue delay.

A tool's duration is measured per job (``estimator.job_tracker``) as the next turn's arrival minus the
previous turn's finish.

Invariants:
- Every recorded duration is finite and >= 0 (negative gaps are clamped to 0, NaN/inf dropped).
- ``DurationHistory.count(None)`` is the number of samples over all tools, so until a window fills or
  a tool is forgotten ``sum(count(f) for f in tools) == count(None)`` (a turn without a tool counts
  only in the total).
- Each window is bounded, and so is the number of tools with a window (``max_tools``; the tool
  recorded least recently is forgotten first): memory grows neither with uptime nor with the
  number of distinct tool names clients send.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["DurationHistory", "EmpiricalCDF", "EtaTracker", "SlidingMean"]


class EmpiricalCDF:
    """A discrete CDF: ``P(tau) = cum[i]`` for the last ``support[i] <= tau`` (0 below the support).

    Built from samples (``P(tau)`` = fraction of samples <= tau) or from predicted quantiles
    (``P(q_alpha) = alpha``; the mass above the top quantile is the unseen tail).
    ``support`` is strictly increasing, ``cum`` non-decreasing in (0, 1].
    """

    def __init__(self, samples: Iterable[float]) -> None:
        arr = np.asarray(samples if isinstance(samples, np.ndarray) else list(samples), float)
        if arr.size == 0:
            raise ValueError("an empirical CDF needs at least one sample")
        self.support, counts = np.unique(arr, return_counts=True)
        self.cum = np.cumsum(counts) / arr.size

    @classmethod
    def from_quantiles(cls, levels: Sequence[float], values: Sequence[float]) -> EmpiricalCDF:
        """``P(values[i]) = levels[i]``; values are sorted (quantile crossing repaired) first."""
        lv = np.asarray(levels, float)
        vals = np.sort(np.asarray(values, float))
        if lv.size == 0 or lv.shape != vals.shape:
            raise ValueError("need one value per quantile level")
        self = cls.__new__(cls)
        # Equal values collapse onto one support point carrying the highest level.
        self.support, idx = np.unique(vals[::-1], return_index=True)
        self.cum = np.sort(lv)[::-1][idx]
        return self

    def __len__(self) -> int:
        return int(self.support.size)

    def cdf(self, tau: float) -> float:
        """``P(D <= tau)``."""
        i = int(np.searchsorted(self.support, tau, side="right"))
        return 0.0 if i == 0 else float(self.cum[i - 1])

    def _mass(self) -> np.ndarray:
        return np.diff(self.cum, prepend=0.0)

    def mean(self) -> float:
        """E[D] over the support (the unseen tail above a quantile CDF's top carries no mass)."""
        m = self._mass()
        return float(np.dot(m, self.support) / m.sum())

    def residual_mean(self, elapsed: float) -> float | None:
        """E[D - elapsed | D > elapsed], or None if no support point exceeds ``elapsed``."""
        m = self._mass()
        sel = self.support > elapsed
        if not sel.any() or m[sel].sum() <= 0:
            return None
        return float(np.dot(m[sel], self.support[sel]) / m[sel].sum() - elapsed)


class DurationHistory:
    """Per-tool sliding windows of durations plus one window over all tools."""

    def __init__(self, window: int = 4096, all_window: int = 16384, max_tools: int = 1024) -> None:
        self.window = window
        self.max_tools = max_tools
        self._per_tool: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque(maxlen=all_window)
        self._cache: dict[str | None, EmpiricalCDF] = {}

    def add(self, tool: str | None, seconds: float) -> bool:
        """Record one duration; returns False (and records nothing) if it is not finite."""
        if not math.isfinite(seconds):
            return False
        seconds = max(0.0, float(seconds))
        if tool is not None:
            self._per_tool.setdefault(tool, deque(maxlen=self.window)).append(seconds)
            self._per_tool.move_to_end(tool)
            self._cache.pop(tool, None)
            while len(self._per_tool) > self.max_tools:
                self._cache.pop(self._per_tool.popitem(last=False)[0], None)
        self._all.append(seconds)
        self._cache.pop(None, None)
        return True

    def count(self, tool: str | None) -> int:
        """Samples of ``tool``; ``None`` means all tools."""
        if tool is None:
            return len(self._all)
        return len(self._per_tool.get(tool, ()))

    def tools(self) -> list[str]:
        """Every tool with at least one sample, sorted."""
        return sorted(self._per_tool)

    def mean(self, tool: str | None) -> float | None:
        """Mean duration of ``tool`` (``None``: all tools), or None while it has no sample."""
        samples = self._all if tool is None else self._per_tool.get(tool)
        return (sum(samples) / len(samples)) if samples else None

    def distribution(self, tool: str | None) -> EmpiricalCDF | None:
        """The ECDF of ``tool`` (``None``: all tools), cached until the next ``add``; None if empty."""
        if self.count(tool) == 0:
            return None
        dist = self._cache.get(tool)
        if dist is None:
            dist = EmpiricalCDF(np.fromiter(self._all if tool is None else self._per_tool[tool], float))
            self._cache[tool] = dist
        return dist


class SlidingMean:
    """Mean of the last ``window`` values; ``default`` while empty."""

    def __init__(self, window: int = 64, default: float = 0.0) -> None:
        self._values: deque[float] = deque(maxlen=window)
        self._sum = 0.0
        self.default = default

    def add(self, value: float) -> None:
        """Add one value; NaN and inf are ignored."""
        if not math.isfinite(value):
            return
        if len(self._values) == self._values.maxlen:
            self._sum -= self._values[0]
        self._values.append(float(value))
        self._sum += float(value)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def value(self) -> float:
        return self._sum / len(self._values) if self._values else self.default


class EtaTracker:
    """``eta = -corr(k, N - k)`` over (turn index k, turns remaining N - k) of recently finished jobs.

    Clamped to [0, 1]; ``default`` until ``min_jobs`` jobs finished or while the correlation is undefined.
    """

    def __init__(self, window_jobs: int = 256, min_jobs: int = 8, default: float = 1.0) -> None:
        self._jobs: deque[int] = deque(maxlen=window_jobs)
        self.min_jobs = min_jobs
        self.default = default
        self._eta: float | None = None

    def add_job(self, num_turns: int) -> None:
        """A job finished after ``num_turns`` turns (ignored when < 1)."""
        if num_turns >= 1:
            self._jobs.append(int(num_turns))
            self._eta = None

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def value(self) -> float:
        """The current eta (cached until the next ``add_job``)."""
        if len(self._jobs) < self.min_jobs:
            return self.default
        if self._eta is None:
            self._eta = self._anticorrelation()
        return self._eta

    def _anticorrelation(self) -> float:
        """``-corr(k, N - k)`` over every turn of the kept jobs, clamped to [0, 1]; default if undefined."""
        n = np.repeat(np.asarray(self._jobs, float), np.asarray(self._jobs))
        k = np.concatenate([np.arange(m, dtype=float) for m in self._jobs])
        rem = n - k
        if k.std() == 0.0 or rem.std() == 0.0:
            return self.default
        return float(np.clip(-np.corrcoef(k, rem)[0, 1], 0.0, 1.0))
