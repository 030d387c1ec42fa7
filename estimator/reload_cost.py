"""R(ctx): seconds to re-prefill a context of ``ctx`` tokens, a quadratic fitted on the loaded model.

Invariants:
- ``R(n) = a + b*n + c*n**2`` with a, b, c >= 0, so R is non-negative and non-decreasing for n >= 0.
- ``fit`` is an exact non-negative least squares over the three coefficients (all 7 active sets).
- ``save``/``load`` round-trip the coefficients through JSON.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["ReloadCostModel"]


@dataclass(frozen=True)
class ReloadCostModel:
    """Prefill seconds as a quadratic in context tokens. The defaults are a rough small-GPU guess."""

    a: float = 0.01
    b: float = 1e-4
    c: float = 1e-10

    def __post_init__(self) -> None:
        if min(self.a, self.b, self.c) < 0:
            raise ValueError("reload-cost coefficients must be non-negative")

    def __call__(self, context_tokens: float) -> float:
        n = max(0.0, float(context_tokens))
        return self.a + self.b * n + self.c * n * n

    @classmethod
    def fit(cls, lengths: Sequence[float], seconds: Sequence[float]) -> ReloadCostModel:
        """Least-squares quadratic with non-negative coefficients (numpy only)."""
        x = np.asarray(lengths, float)
        y = np.asarray(seconds, float)
        if x.shape != y.shape or x.size == 0:
            raise ValueError("need the same non-zero number of lengths and timings")
        scale = max(1.0, float(np.abs(x).max()))
        u = x / scale  # conditioning: columns 1, u, u^2 all O(1)
        design = np.stack([np.ones_like(u), u, u * u], axis=1)
        best: tuple[float, np.ndarray] | None = None
        for k in range(1, 4):
            for active in itertools.combinations(range(3), k):
                cols = list(active)
                coef, *_ = np.linalg.lstsq(design[:, cols], y, rcond=None)
                if np.any(coef < 0):
                    continue
                full = np.zeros(3)
                full[cols] = coef
                err = float(np.sum((design @ full - y) ** 2))
                if best is None or err < best[0] - 1e-15:
                    best = (err, full)
        full = best[1] if best is not None else np.zeros(3)
        return cls(a=float(full[0]), b=float(full[1] / scale), c=float(full[2] / scale**2))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"model": "quadratic", **self.to_dict()}, f, indent=2)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReloadCostModel:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return cls(a=float(data["a"]), b=float(data["b"]), c=float(data["c"]))
