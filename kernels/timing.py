"""Timing a kernel call: the best of a few runs after a warm-up (the calibration and the benchmarks)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch


def best_seconds(fn: Callable[[], object], repeats: int, device: str = "cpu") -> float:
    """The best of ``repeats`` timed calls of ``fn``, after one untimed warm-up call; on a GPU each
    call is timed to its kernels' end."""

    def call() -> None:
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    return best_seconds_each([call], repeats)[0]


def best_seconds_each(fns: Sequence[Callable[[], object]], repeats: int) -> list[float]:
    """The best of ``repeats`` timed calls of each of ``fns``, taken in turns (one call of each per
    round, after one untimed warm-up round): a burst of load from elsewhere slows every contender
    alike instead of the one that happened to run during it (route calibrations compare these)."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best
