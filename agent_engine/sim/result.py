"""The outcome of one simulated run: per-job and per-turn measurements and engine counters.

Invariants: ``summary()`` is a pure function of the fields and has the keys of ``bench jct``'s
per-policy object (``mean_jct_s``, ``p50/p90/p99_jct_s``, ``jobs_per_min``, ``mean_queue_s``,
``prefix_hit_ratio``) plus the simulator's counters; statistics of no data are None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agent_engine.json_types import JsonObject

__all__ = ["SimResult"]


@dataclass
class SimResult:
    """Per-job and per-turn outcomes plus engine counters of one run."""

    policy: str
    jcts: list[float] = field(default_factory=list)
    job_spans: list[tuple[float, float]] = field(default_factory=list)  # (first send, last finish)
    queue_delays: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    computed_tokens: int = 0
    steps: int = 0
    busy_seconds: float = 0.0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    step_times: list[float] = field(default_factory=list)  # only with ``record_steps``
    preemptions: int = 0
    pins: dict[str, float] = field(default_factory=dict)
    tier: dict[str, float] = field(default_factory=dict)  # second-tier counters (empty without a tier)

    def summary(self) -> JsonObject:
        """The keys of ``bench jct``'s per-policy object, plus simulator counters."""
        j = np.asarray(self.jcts, float)
        span = 0.0
        if self.job_spans:
            span = max(e for _, e in self.job_spans) - min(s for s, _ in self.job_spans)

        def pct(q: float) -> float | None:
            return float(np.percentile(j, q)) if j.size else None

        decode = self.output_tokens - len(self.queue_delays)  # the last token of a turn is never computed
        return {
            "jobs": len(self.jcts),
            "mean_jct_s": float(j.mean()) if j.size else None,
            "p50_jct_s": pct(50), "p90_jct_s": pct(90), "p99_jct_s": pct(99),
            "jobs_per_min": 60.0 * len(self.jcts) / span if span > 0 else None,
            "mean_queue_s": float(np.mean(self.queue_delays)) if self.queue_delays else None,
            "prefix_hit_ratio": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None,
            "prefill_tokens": self.computed_tokens - decode,
            "preemptions": self.preemptions,
            "pins": self.pins, "tier": self.tier,
            "steps": self.steps, "sim_seconds": self.sim_seconds, "busy_seconds": self.busy_seconds,
            "wall_seconds": self.wall_seconds,
        }
