"""One simulated run's settings: the engine's options (an ``EngineConfig``), its KV pool, the workload.

The engine side is the same ``agent_engine.config.EngineConfig`` the real engine reads, and the
scheduler's limits come from ``EngineConfig.scheduler_config`` exactly as in the engine, so a
simulated scheduler and a real one built from the same options are configured alike. The pool
(``num_blocks``, ``max_model_len``) is resolved by the caller (``agent_engine.sim.cli`` sizes it
from the model and GPU): the engine options ``num_kv_blocks``, ``kv_cache_memory``,
``gpu_memory_utilization`` and ``max_model_len`` are requests, the two pool fields the result.

Policy labels (``fcfs``, ``continuum-fixed+tier``, ...) are parsed by ``agent_engine.sim.policy_label``;
a run takes a label's policy, TTL policy and memory variant (``for_label``), while its fixed TTL's pin
threshold is the engine's (``--pin-threshold``), so a label with ``@SECONDS`` is refused here.

Invariants: a ``SimConfig`` is frozen; ``for_label(label, jps).label == label`` for every label of
``policy_label.POLICIES``, with or without a memory variant; its limits are checked where they are
used (``SchedulerConfig``, ``ReplayOptions``), so a bad one fails before the first event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.json_types import JsonValue
from agent_engine.sim.policy_label import PolicyLabel, parse_label, policy_label
from agent_engine.workloads.replay.plan import ReplayOptions
from scheduler import SchedulerConfig

__all__ = ["SimConfig", "SweepSetup", "sim_label"]


def sim_label(label: str) -> PolicyLabel:
    """``label`` parsed (``parse_label``), as a simulated run takes it: ``ValueError`` for a label with
    ``@SECONDS`` (the simulator's fixed TTL uses the engine's ``pin_threshold``: ``--pin-threshold``)."""
    parsed = parse_label(label)
    if parsed.pin_threshold is not None:
        raise ValueError(f"policy {label!r}: the simulator's fixed TTL takes --pin-threshold, not @SECONDS")
    return parsed


@dataclass(frozen=True)
class SimConfig:
    """The engine options, the resolved KV pool, and the workload knobs of one simulated run.

    Workload fields follow ``ReplayOptions``: ``jps`` (Poisson arrivals; None: all at t=0),
    ``max_jobs``, ``max_turns``, ``token_scale``, ``time_scale`` and ``seed``.
    """

    engine: EngineConfig
    num_blocks: int
    max_model_len: int
    jps: float | None = None
    max_jobs: int | None = None
    max_turns: int | None = None
    token_scale: float = 1.0
    time_scale: float = 1.0
    seed: int = 0
    tier_blocks: int = 0  # the second tier a ``+tier`` label gets (a ``+pool`` label: as pool blocks)
    memory: str = ""  # "" | one of ``policy_label.MEMORY_VARIANTS``

    @property
    def label(self) -> str:
        """The policy label this run reports (see ``policy_label``), with its memory variant."""
        return policy_label(self.engine) + (f"+{self.memory}" if self.memory else "")

    def for_label(self, label: str, jps: float | None) -> SimConfig:
        """This config under ``label``'s policy and memory variant, at ``jps``."""
        parsed = sim_label(label)
        if parsed.memory and not self.tier_blocks:
            raise ValueError(f"{label!r} needs a second tier: give --kv-offload-bytes")
        return dataclasses.replace(self, engine=parsed.engine(self.engine), jps=jps, memory=parsed.memory)

    def scheduler_config(self) -> SchedulerConfig:
        """The scheduler's limits, built by the engine config as the real engine builds them."""
        grown = self.tier_blocks if self.memory == "pool" else 0
        tier = self.tier_blocks if self.memory == "tier" else 0
        return self.engine.scheduler_config(self.num_blocks + grown, self.max_model_len, tier)

    def replay_options(self) -> ReplayOptions:
        """The replay plan's knobs. Plans keep ``prompt + max_tokens`` below ``max_model_len`` (the
        scheduler ends a request that reaches it), so every turn generates all its planned tokens."""
        return ReplayOptions(
            jps=self.jps, max_jobs=self.max_jobs, max_turns=self.max_turns, token_scale=self.token_scale,
            time_scale=self.time_scale, seed=self.seed, max_model_len=self.max_model_len - 1, progress=False,
        )


@dataclass(frozen=True)
class SweepSetup:
    """What one ``agent-engine sim`` run sweeps: policy labels x loads over ``base``, on ``jobs``, timed by
    ``cost`` (a ``CostModel``); ``trace`` is the trace's label for the printout and the JSON."""

    policies: list[str]
    loads: list[float]
    base: SimConfig
    cost: Any
    jobs: list[JsonValue]
    trace: str
