"""The estimator's settings and its per-turn answer.

Invariants (checked on construction): ``ttl_policy`` is one of ``TTL_POLICIES``;
``cold_start_samples >= 1``, ``pin_threshold >= 0`` and ``default_ttl >= 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TTL_POLICIES", "EstimatorConfig", "PolicyName", "TurnDecision"]

TTL_POLICIES = ("fixed", "paper", "learned")
PolicyName = Literal["fixed", "paper", "learned"]


@dataclass(frozen=True)
class EstimatorConfig:
    ttl_policy: PolicyName = "paper"
    pin_threshold: float = 2.0  # fixed: pin this long unless the tool's mean exceeds it
    cold_start_samples: int = 100  # K
    default_ttl: float = 2.0  # paper/learned below K samples in total
    history_window: int = 4096  # durations kept per tool
    all_tools_window: int = 16384  # durations kept over all tools
    queue_delay_window: int = 64  # T: sliding mean over the last unpinned queueing delays
    eta_window_jobs: int = 256
    eta_min_jobs: int = 8  # eta = 1.0 until this many jobs finished
    pin_without_tool: bool = True  # fixed: pin a turn that names no tool (the fork does not)
    learned_model_path: str | None = None
    learned_refit_every: int = 1000  # online refit after this many new samples (0 = never)
    learned_refit_in_background: bool = True
    reload_cost_profile: str | None = None  # JSON written by ReloadCostModel.save

    def __post_init__(self) -> None:
        if self.ttl_policy not in TTL_POLICIES:
            raise ValueError(f"ttl_policy must be one of {TTL_POLICIES}, not {self.ttl_policy!r}")
        if self.cold_start_samples < 1 or self.pin_threshold < 0 or self.default_ttl < 0:
            raise ValueError("cold_start_samples >= 1, pin_threshold >= 0 and default_ttl >= 0")


@dataclass(frozen=True)
class TurnDecision:
    """The tool a finished turn called (None: none named) and how long to pin its blocks."""

    tool_name: str | None
    ttl: float  # seconds; 0 = don't pin
