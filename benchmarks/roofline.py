"""This machine's roofline: peak matmul GFLOP/s (fp32, bf16, int8) and memory bandwidth, measured.

    agent-engine bench kernels --roofline [--threads 2]

The ceilings every throughput claim is read against: a decode step of a few streams reads every weight
once per token (bound by bandwidth), a prefill or a large batch multiplies big matrices (bound by the
matmul peak). Measured with torch's own kernels (oneDNN / MKL), the best of ``repeats`` runs:

- matmul: ``n x n @ n x n`` for fp32 and bf16 (``torch.mm``), int8 x int8 -> int32 (``torch._int_mm``,
  left out where this torch has no CPU kernel for it); 2 n^3 operations each;
- bandwidth: ``copy_`` of a 256 MiB fp32 tensor (read + write: 512 MiB moved) and ``sum`` over it
  (read only), far larger than any cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

COPY_BYTES = 256 * 1024 * 1024


def best_seconds(fn: Callable[[], object], repeats: int, device: str = "cpu") -> float:
    """``kernels.timing.best_seconds`` (imported on call: importing a benchmark loads no torch)."""
    from kernels.timing import best_seconds as timed

    return timed(fn, repeats, device)


def matmul_gflops(dtype_name: str, n: int = 2048, repeats: int = 5, device: str = "cpu") -> float | None:
    """Best GFLOP/s of an ``n x n`` matmul in ``dtype_name`` (fp32, bf16, int8) on ``device``; None if
    unsupported. fp32 is full float32 (torch's default: no TF32 on a GPU)."""
    import torch

    if dtype_name == "int8":
        a = torch.randint(-64, 64, (n, n), dtype=torch.int8, device=device)
        b = torch.randint(-64, 64, (n, n), dtype=torch.int8, device=device)
        try:
            seconds = best_seconds(lambda: torch._int_mm(a, b), repeats, device)
        except RuntimeError:
            return None
    else:
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
        a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
        seconds = best_seconds(lambda: torch.mm(a, b), repeats, device)
    return 2 * n**3 / seconds / 1e9


def bandwidth_gbs(repeats: int = 5, n_bytes: int = COPY_BYTES, device: str = "cpu") -> dict[str, float]:
    """Best GB/s of a copy of ``n_bytes`` (bytes read + written) and a sum over them (bytes read)."""
    import torch

    src = torch.randn(n_bytes // 4, device=device)
    dst = torch.empty_like(src)
    copy_s = best_seconds(lambda: dst.copy_(src), repeats, device)
    sum_s = best_seconds(lambda: src.sum(), repeats, device)
    return {"copy": 2 * n_bytes / copy_s / 1e9, "read": n_bytes / sum_s / 1e9}


def measure(threads: int, repeats: int = 5) -> dict[str, Any]:
    """The roofline at ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    peaks = {name: matmul_gflops(name, repeats=repeats) for name in ("fp32", "bf16", "int8")}
    return {"threads": threads, "gflops": peaks, "bandwidth_gbs": bandwidth_gbs(repeats)}


def rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """Table rows: threads, fp32 / bf16 / int8 GFLOP/s (GOP/s for int8), copy and read GB/s."""
    return [[r["threads"], r["gflops"]["fp32"], r["gflops"]["bf16"], r["gflops"]["int8"],
             r["bandwidth_gbs"]["copy"], r["bandwidth_gbs"]["read"]] for r in results]


HEADERS = ["threads", "fp32 GFLOP/s", "bf16 GFLOP/s", "int8 GOP/s", "copy GB/s", "read GB/s"]
