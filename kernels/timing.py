"""Timing a kernel call: the best of a few runs after a warm-up (the calibration and the benchmarks)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def best_seconds(fn: Callable[[], object], repeats: int, device: str = "cpu") -> float:
    """The best of ``repeats`` timed calls of ``fn``, after one untimed warm-up call; on a GPU each
    call is timed to its kernels' end."""

    def call() -> None:
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    call()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best
