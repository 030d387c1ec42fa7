"""One simulated run's settings: the engine's options (an ``EngineConfig``), its KV pool, the workload.

The engine side is the same ``agent_engine.config.EngineConfig`` the real engine reads, and the
scheduler's limits come from ``EngineConfig.scheduler_config`` exactly as in the engine, so a
simulated scheduler and a real one built from the same options are configured alike. The pool
(``num_blocks``, ``max_model_len``) is resolved by the caller (``agent_engine.sim.cli`` sizes it
from the model and GPU): the engine options ``num_kv_blocks``, ``kv_cache_memory``,
``gpu_memory_utilization`` and ``max_model_len`` are requests, the two pool fields the result.

Policy labels (``POLICIES``) name a scheduling policy with its TTL rule, as ``bench jct`` does:
``fcfs``, ``priority``, ``continuum`` (the paper's TTLs) and ``continuum-<ttl policy>``; they are
built from ``agent_engine.config.POLICY_NAMES`` and ``TTL_POLICY_NAMES``.

Invariants: ``policy_label(engine_for_policy(label)) == label`` for every label in ``POLICIES``;
a ``SimConfig`` is frozen; its limits are checked where they are used (``SchedulerConfig``,
``ReplayOptions``), so a bad one fails before the first event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agent_engine.config import POLICY_NAMES, TTL_POLICY_NAMES, EngineConfig
from agent_engine.workloads.replay.plan import ReplayOptions
from scheduler import SchedulerConfig, policy_class

__all__ = ["MEMORY_VARIANTS", "POLICIES", "SimConfig", "SweepSetup", "engine_for_policy", "parse_policy",
           "policy_label", "split_memory"]

_PAPER = "paper"


def _labels(name: str) -> tuple[str, ...]:
    """A policy's labels: its name, and for a policy that pins, ``<name>-<ttl policy>`` per other TTL rule."""
    if not policy_class(name).uses_pins:
        return (name,)
    return (name, *(f"{name}-{t}" for t in TTL_POLICY_NAMES if t != _PAPER))


POLICIES: tuple[str, ...] = tuple(label for name in POLICY_NAMES for label in _labels(name))


# Memory variants of a label (``continuum+tier``): the run's second KV tier of ``SimConfig.tier_blocks``
# (``+tier``), or no tier but a pool grown by the same bytes (``+pool``: the equal-memory reference).
MEMORY_VARIANTS = ("tier", "pool")


def split_memory(label: str) -> tuple[str, str]:
    """``(policy label, memory variant or "")``: ``continuum+tier`` -> ``("continuum", "tier")``."""
    base, sep, memory = label.partition("+")
    if sep and memory not in MEMORY_VARIANTS:
        raise ValueError(f"unknown memory variant {memory!r} in {label!r}; known: {MEMORY_VARIANTS}")
    return base, memory


def parse_policy(label: str) -> tuple[str, str]:
    """``(scheduling policy, ttl policy)`` of a policy label; policies without pins get ``fixed``."""
    label = split_memory(label)[0]
    if label not in POLICIES:
        raise ValueError(f"unknown policy {label!r}; known: {POLICIES}")
    name, _, ttl = label.partition("-")
    if not policy_class(name).uses_pins:
        return name, "fixed"
    return name, ttl or _PAPER


def engine_for_policy(label: str, base: EngineConfig | None = None) -> EngineConfig:
    """``base`` (default: ``EngineConfig()``) with the policy and TTL policy that ``label`` names."""
    policy, ttl_policy = parse_policy(label)
    return dataclasses.replace(base or EngineConfig(), policy=policy, ttl_policy=ttl_policy)


def policy_label(engine: EngineConfig) -> str:
    """The label of an engine's policy (inverse of ``engine_for_policy``)."""
    if not policy_class(engine.policy).uses_pins or engine.ttl_policy == _PAPER:
        return engine.policy
    return f"{engine.policy}-{engine.ttl_policy}"


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
    memory: str = ""  # "" | one of ``MEMORY_VARIANTS``

    @property
    def label(self) -> str:
        """The policy label this run reports (see ``policy_label``), with its memory variant."""
        return policy_label(self.engine) + (f"+{self.memory}" if self.memory else "")

    def for_label(self, label: str, jps: float | None) -> SimConfig:
        """This config under ``label``'s policy and memory variant, at ``jps``."""
        memory = split_memory(label)[1]
        if memory and not self.tier_blocks:
            raise ValueError(f"{label!r} needs a second tier: give --kv-offload-bytes")
        return dataclasses.replace(self, engine=engine_for_policy(label, self.engine), jps=jps, memory=memory)

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
    jobs: list[Any]
    trace: str
