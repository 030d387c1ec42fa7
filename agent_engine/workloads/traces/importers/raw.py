"""A job as read, before repairs: turns in order, each with the place it came from.

Invariants: ``turns`` and ``places`` have the same length (at least one); a turn's ``tool_seconds`` of
``None`` before the last turn means "unknown" (the repair step imputes it); it may still be negative
(clock skew; the repair step clamps it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.format import TraceTurn
from agent_engine.workloads.traces.importers.report import Place

__all__ = ["RawJob"]


@dataclass
class RawJob:
    """One job as read (see the module docstring)."""

    job_id: str
    turns: list[TraceTurn]
    places: list[Place]
    meta: JsonObject = field(default_factory=dict)

    @property
    def place(self) -> Place:
        """Where the job starts."""
        return self.places[0]
