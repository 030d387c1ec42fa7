"""One-dimensional distributions of a workload profile: empirical (quantiles), log-normal, normal.

Invariants:
- ``Dist.sample`` is a pure function of the generator's state; integer dists return ints; every
  sample lies in ``[lo, hi]`` when those bounds are set; empirical dists never leave the range of
  the data they were fitted on.
- ``Dist.from_json(d.to_json()) == d`` (JSON round trip).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_engine.json_types import JsonObject

__all__ = ["QUANTILE_PROBS", "Dist"]

# Quantile grid of empirical dists: fine in both tails, where the slow tools live.
QUANTILE_PROBS: tuple[float, ...] = (
    (0.0, 0.001, 0.005) + tuple(round(i / 100, 2) for i in range(1, 100)) + (0.995, 0.999, 1.0)
)


@dataclass(frozen=True)
class Dist:
    """A 1-D distribution: ``empirical`` (inverse CDF through quantiles), ``lognormal`` or ``normal``.

    ``params``: empirical: ``probs``, ``values`` (both non-decreasing, probs from 0 to 1);
    lognormal: ``mu``, ``sigma`` (of the log); normal: ``mean``, ``std``. Samples are clipped to
    ``[lo, hi]`` (None: unbounded) and rounded when ``integer``.
    """

    kind: str
    params: JsonObject
    integer: bool = False
    lo: float | None = None
    hi: float | None = None

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One sample (``size=None``) or a numpy array of ``size`` samples."""
        n = 1 if size is None else size
        if self.kind == "empirical":
            x = np.interp(rng.random(n), self.params["probs"], self.params["values"])
        elif self.kind == "lognormal":
            x = np.exp(rng.normal(self.params["mu"], self.params["sigma"], n))
        elif self.kind == "normal":
            x = rng.normal(self.params["mean"], self.params["std"], n)
        else:
            raise ValueError(f"unknown dist kind {self.kind!r}")
        if self.lo is not None or self.hi is not None:
            x = np.clip(x, self.lo, self.hi)
        if self.integer:
            x = np.rint(x).astype(np.int64)
        if size is None:
            return int(x[0]) if self.integer else float(x[0])
        return x

    def to_json(self) -> JsonObject:
        """A JSON-ready dict."""
        d: JsonObject = {"kind": self.kind, **self.params, "integer": self.integer}
        if self.lo is not None:
            d["lo"] = self.lo
        if self.hi is not None:
            d["hi"] = self.hi
        return d

    @classmethod
    def from_json(cls, d: JsonObject) -> Dist:
        """Inverse of ``to_json``."""
        rest = {k: v for k, v in d.items() if k not in ("kind", "integer", "lo", "hi")}
        return cls(
            kind=d["kind"], params=rest, integer=bool(d.get("integer", False)), lo=d.get("lo"), hi=d.get("hi")
        )

    @classmethod
    def empirical(cls, data: Sequence[float], integer: bool = False, digits: int = 4) -> Dist:
        """Quantiles of ``data`` on ``QUANTILE_PROBS`` (values rounded to ``digits`` decimals)."""
        arr = np.asarray(data, dtype=np.float64)
        if arr.size == 0:
            raise ValueError("cannot fit a distribution to no data")
        q = np.quantile(arr, QUANTILE_PROBS)
        values = [int(round(v)) for v in q] if integer else [round(float(v), digits) for v in q]
        return cls("empirical", {"probs": list(QUANTILE_PROBS), "values": values}, integer=integer)

    @classmethod
    def lognormal_fit(cls, data: Sequence[float], floor: float = 1e-3) -> Dist:
        """Log-normal by moments of ``log(max(x, floor))``, clipped to the data's range."""
        arr = np.maximum(np.asarray(data, dtype=np.float64), floor)
        logs = np.log(arr)
        params = {"mu": round(float(logs.mean()), 6), "sigma": round(float(logs.std()), 6)}
        return cls("lognormal", params, lo=round(float(arr.min()), 4), hi=round(float(arr.max()), 4))

