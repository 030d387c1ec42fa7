"""The public Continuum fork's rule: pin for ``pin_threshold`` s unless the tool is slow on average.

Invariants:
- The TTL is either ``pin_threshold`` or 0 (before the ``ttl_hint`` cap).
- A tool never seen has mean 0 s, so it is pinned.
- A turn without a tool uses the mean over all tools (the fork pins nothing there; set
  ``pin_without_tool=False`` for the fork's exact behaviour).
"""

from __future__ import annotations

from estimator.durations import DurationHistory
from estimator.ttl_paper import TTLRequest, cap_ttl

__all__ = ["FixedTTLPolicy"]


class FixedTTLPolicy:
    name = "fixed"

    def __init__(self, history: DurationHistory, pin_threshold: float = 2.0, pin_without_tool: bool = True) -> None:
        self.history = history
        self.pin_threshold = pin_threshold
        self.pin_without_tool = pin_without_tool
        self.last_source = "fixed"

    def ttl(self, req: TTLRequest) -> float:
        """``pin_threshold`` if mean duration of the tool <= threshold (unseen: 0 s), else 0; capped."""
        if req.tool_name is None and not self.pin_without_tool:
            return 0.0
        mean = self.history.mean(req.tool_name)
        ttl = 0.0 if (mean or 0.0) > self.pin_threshold else self.pin_threshold
        return cap_ttl(ttl, req.ttl_hint)
