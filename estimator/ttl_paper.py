"""The paper's TTL: ``tau* = argmax_{tau in {0} u durations(f)} P_f(tau) * (T * eta + R(r)) - tau``.

Invariants:
- ``best_tau`` returns 0 or one of the recorded durations; on ties the smallest tau wins, so a
  zero-gain or all-losing case returns 0 (don't pin).
- Cold start: fewer than ``cold_start_samples`` samples in total -> ``default_ttl``; fewer for the
  tool (or no tool named) -> the CDF over all tools; otherwise the tool's own CDF. With a second tier
  the cold-start TTL is also at most the gain (a miss's load): whatever the distribution, a pin longer
  than the gain can only lose (``P(tau) * gain - tau < 0`` past it), and the gain is known from start-up.
- Every policy's result is ``cap_ttl``-ed: >= 0, not NaN and <= ``ttl_hint`` when a hint is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimator.durations import DurationHistory, EmpiricalCDF, EtaTracker, SlidingMean
from estimator.reload_cost import ReloadCostModel

__all__ = ["PaperTTLPolicy", "TTLRequest", "best_tau", "cap_ttl"]


@dataclass(frozen=True)
class TTLRequest:
    """A finished non-final turn asking for a pin TTL."""

    tool_name: str | None
    context_tokens: int = 0
    turn_index: int = 0
    ttl_hint: float | None = None
    command: str | None = None
    job_durations: tuple[float, ...] = ()  # this job's earlier measured tool durations, oldest first


def cap_ttl(ttl: float, hint: float | None) -> float:
    """Clamp to [0, hint] (hint None: [0, inf)); NaN -> 0."""
    if math.isnan(ttl):
        ttl = 0.0
    ttl = max(0.0, ttl)
    if hint is not None:
        ttl = min(ttl, max(0.0, float(hint)))
    return float(ttl)


def best_tau(dist: EmpiricalCDF, gain: float) -> tuple[float, float]:
    """``(tau*, value)`` maximising ``P(tau) * gain - tau`` over tau in {0} u support; ties -> smallest tau."""
    values = dist.cum * gain - dist.support
    zero_value = dist.cdf(0.0) * gain
    i = int(np.argmax(values))  # first maximum: the smallest tau among ties
    if values[i] > zero_value:
        return float(dist.support[i]), float(values[i])
    return 0.0, float(zero_value)


class PaperTTLPolicy:
    """The paper's rule over measured per-tool durations."""

    name = "paper"

    def __init__(
        self,
        history: DurationHistory,
        reload_cost: ReloadCostModel,
        queue_delay: SlidingMean,
        eta: EtaTracker,
        cold_start_samples: int = 100,
        default_ttl: float = 2.0,
        reload_scale: SlidingMean | None = None,
    ) -> None:
        self.history = history
        self.reload_cost = reload_cost
        # Observed / profiled reload time of recent un-pinned returns (>= 1): the start-up profile
        # times prefill on an idle engine, a reload under load takes longer.
        self.reload_scale = reload_scale
        self.queue_delay = queue_delay
        self.eta = eta
        self.cold_start_samples = cold_start_samples
        self.default_ttl = default_ttl
        self.last_source = "none"
        # With a second KV tier: the load-back cost of a demoted context (``Estimator.set_tier_reload_cost``).
        self.tier_reload_cost: ReloadCostModel | None = None

    def gain(self, req: TTLRequest) -> float:
        """``T * eta + R(r)``: seconds saved if the job comes back within the pin.

        ``R`` is the start-up profile scaled by how much slower reloads measured under load were. With a
        second tier a miss demotes instead of dropping: the returning turn loads its blocks back (the
        cheaper of that and a re-prefill) and, its job being warm in the tier, is ordered like a pinned
        one, so it does not queue as an evicted job does: the gain is the load alone, no ``T * eta``.
        """
        scale = max(1.0, self.reload_scale.value) if self.reload_scale is not None else 1.0
        miss = self.reload_cost(req.context_tokens) * scale
        if self.tier_reload_cost is not None:
            return min(miss, self.tier_reload_cost(req.context_tokens))
        return self.queue_delay.value * self.eta.value + miss

    def distribution(self, req: TTLRequest) -> tuple[EmpiricalCDF | None, str]:
        """The duration distribution to use and its source (``cold_start``, ``tool`` or ``all_tools``)."""
        k = self.cold_start_samples
        if self.history.count(None) < k:
            return None, "cold_start"
        if req.tool_name is not None and self.history.count(req.tool_name) >= k:
            return self.history.distribution(req.tool_name), "tool"
        return self.history.distribution(None), "all_tools"

    def ttl(self, req: TTLRequest) -> float:
        dist, self.last_source = self.distribution(req)
        if dist is None:
            bound = self.gain(req) if self.tier_reload_cost is not None else math.inf
            return cap_ttl(min(self.default_ttl, bound), req.ttl_hint)
        tau, _ = best_tau(dist, self.gain(req))
        return cap_ttl(tau, req.ttl_hint)
