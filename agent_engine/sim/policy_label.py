"""Policy labels: the names ``agent-engine sim`` and ``bench jct`` give a scheduling policy run.

Grammar: ``<policy>[-<ttl policy>][@<seconds>][+<memory>]``

- ``<policy>`` is one of ``agent_engine.config.POLICY_NAMES``. A policy that pins takes a TTL rule of
  ``TTL_POLICY_NAMES`` after ``-`` (none: the paper's TTLs); one that does not pin takes none (its TTL
  policy reads ``fixed``).
- ``@<seconds>``: the fixed TTL's pin threshold (``continuum-fixed@0.5``); without it the engine's
  ``pin_threshold`` holds.
- ``+tier``: the run gets a second KV tier; ``+pool``: no tier but a pool grown by the same bytes
  (the equal-memory reference).

``POLICIES`` are the labels without ``@`` and ``+``. ``parse_label`` is the one parser of the grammar,
``PolicyLabel`` its one result; rows that are not policy labels (``bench jct``'s ``unlimited`` and
``vllm-cpu``, its ``+hints=`` and router suffixes) are the benchmark's and are split off before.

Invariants: ``str(parse_label(label)) == label`` for every label in ``POLICIES``, with or without a
memory variant and a threshold written as ``:g`` writes it; ``policy_label(engine_for_policy(label))
== label`` for every label in ``POLICIES``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agent_engine.config import POLICY_NAMES, TTL_POLICY_NAMES, EngineConfig
from scheduler import policy_class

__all__ = ["FIXED_TTL", "MEMORY_VARIANTS", "POLICIES", "PolicyLabel", "engine_for_policy", "parse_label",
           "policy_label"]

_PAPER = "paper"
FIXED_TTL = "fixed"
MEMORY_VARIANTS = ("tier", "pool")


def _labels(name: str) -> tuple[str, ...]:
    """A policy's labels: its name, and for a policy that pins, ``<name>-<ttl policy>`` per other TTL rule."""
    if not policy_class(name).uses_pins:
        return (name,)
    return (name, *(f"{name}-{t}" for t in TTL_POLICY_NAMES if t != _PAPER))


POLICIES: tuple[str, ...] = tuple(label for name in POLICY_NAMES for label in _labels(name))


@dataclass(frozen=True)
class PolicyLabel:
    """A parsed label: the scheduling ``policy``, its ``ttl_policy``, the fixed TTL's ``pin_threshold``
    (None: the engine's) and the ``memory`` variant ("" or one of ``MEMORY_VARIANTS``)."""

    policy: str
    ttl_policy: str
    pin_threshold: float | None = None
    memory: str = ""

    @property
    def base(self) -> str:
        """The label without ``@`` and ``+`` (one of ``POLICIES``)."""
        if not policy_class(self.policy).uses_pins or self.ttl_policy == _PAPER:
            return self.policy
        return f"{self.policy}-{self.ttl_policy}"

    def __str__(self) -> str:
        at = "" if self.pin_threshold is None else f"@{self.pin_threshold:g}"
        return self.base + at + (f"+{self.memory}" if self.memory else "")

    def engine(self, base: EngineConfig | None = None) -> EngineConfig:
        """``base`` (default: ``EngineConfig()``) with this label's policy, TTL policy and, given ``@``,
        pin threshold."""
        threshold = {} if self.pin_threshold is None else {"pin_threshold": self.pin_threshold}
        return dataclasses.replace(base or EngineConfig(), policy=self.policy, ttl_policy=self.ttl_policy,
                                   **threshold)


def parse_label(text: str) -> PolicyLabel:
    """The ``PolicyLabel`` of ``text`` (see the module's grammar); ``ValueError`` naming what is wrong."""
    rest, plus, memory = text.partition("+")
    if plus and memory not in MEMORY_VARIANTS:
        raise ValueError(f"unknown memory variant {memory!r} in {text!r}; known: {MEMORY_VARIANTS}")
    base, at, threshold = rest.partition("@")
    if base not in POLICIES:
        raise ValueError(f"unknown policy {text!r}; known: {', '.join(POLICIES)} (a fixed TTL's label may "
                         f"end in @SECONDS, any label in +{' or +'.join(MEMORY_VARIANTS)})")
    name, _, ttl = base.partition("-")
    pins = policy_class(name).uses_pins
    ttl_policy = (ttl or _PAPER) if pins else FIXED_TTL
    seconds = None
    if at:
        if not (pins and ttl_policy == FIXED_TTL):
            raise ValueError(f"policy {text!r}: only a fixed TTL's label takes @SECONDS")
        try:
            seconds = float(threshold)
        except ValueError:
            raise ValueError(f"policy {text!r}: the threshold after @ must be a number") from None
    return PolicyLabel(name, ttl_policy, seconds, memory)


def engine_for_policy(label: str, base: EngineConfig | None = None) -> EngineConfig:
    """``base`` (default: ``EngineConfig()``) under the policy ``label`` names (``PolicyLabel.engine``)."""
    return parse_label(label).engine(base)


def policy_label(engine: EngineConfig) -> str:
    """The label of an engine's policy, one of ``POLICIES`` (inverse of ``engine_for_policy`` on them)."""
    return PolicyLabel(engine.policy, engine.ttl_policy).base
