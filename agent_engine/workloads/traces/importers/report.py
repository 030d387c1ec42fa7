"""What an import did: counts, every dropped line with its place and reason, every repair note.

Invariants: a dropped line or a repair is always recorded with its ``file:line`` (``Place``); counts
are filled in by the import steps and never recomputed here; ``to_dict`` is JSON-ready and lists every
drop and note, ``print`` shows the counts and at most ``MAX_ROWS`` drops and notes each.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from agent_engine.json_types import JsonObject
from agent_engine.reporting import print_table

__all__ = ["MAX_ROWS", "ImportReport", "Issue", "LineError", "Place"]

MAX_ROWS = 40


@dataclass(frozen=True, order=True)
class Place:
    """A line of an input file (1-based)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Issue:
    """A dropped line or a repair note at ``place``."""

    place: Place
    reason: str

    def to_dict(self) -> JsonObject:
        return {"place": str(self.place), "file": self.place.file, "line": self.place.line,
                "reason": self.reason}


class LineError(ValueError):
    """One input line cannot be used; the message is the reason reported with its place."""


@dataclass
class ImportReport:
    """The counts of one import (see docs/traces.md for what each counts)."""

    files: list[str] = field(default_factory=list)
    shapes: dict[str, str] = field(default_factory=dict)
    lines_read: int = 0
    jobs_kept: int = 0
    turns_kept: int = 0
    segments_split: int = 0
    tool_times_imputed: int = 0
    tool_times_clamped: int = 0
    tokens_estimated: int = 0
    jobs_reordered: int = 0
    dropped: list[Issue] = field(default_factory=list)
    notes: list[Issue] = field(default_factory=list)

    def drop(self, place: Place, reason: str) -> None:
        """Record a line (or a job starting at ``place``) that is not in the output."""
        self.dropped.append(Issue(place, reason))

    def note(self, place: Place, reason: str) -> None:
        """Record a repair made at ``place`` (kept in the output, changed)."""
        self.notes.append(Issue(place, reason))

    def counts(self) -> dict[str, int]:
        """The numbers of the report, in the order they are printed."""
        return {
            "files read": len(self.files),
            "lines read": self.lines_read,
            "jobs kept": self.jobs_kept,
            "turns kept": self.turns_kept,
            "segments split": self.segments_split,
            "tool times imputed": self.tool_times_imputed,
            "tool times clamped": self.tool_times_clamped,
            "token counts estimated": self.tokens_estimated,
            "jobs reordered": self.jobs_reordered,
            "lines dropped": len(self.dropped),
        }

    def to_dict(self) -> JsonObject:
        """JSON-ready: the counts (snake_case keys), the files with their shapes, every drop and note."""
        d = asdict(self)
        d["dropped"] = [i.to_dict() for i in sorted(self.dropped, key=lambda i: i.place)]
        d["notes"] = [i.to_dict() for i in sorted(self.notes, key=lambda i: i.place)]
        d["lines_dropped"] = len(self.dropped)
        return d

    def print(self) -> None:
        """The counts as a table, then the dropped lines and the repair notes (first ``MAX_ROWS`` each)."""
        print_table(["import", "count"], list(self.counts().items()))
        for title, issues in (("dropped", self.dropped), ("repaired", self.notes)):
            if not issues:
                continue
            print()
            shown = sorted(issues, key=lambda i: i.place)[:MAX_ROWS]
            width = max(len(i.reason) for i in shown)  # pad: reasons read left-aligned
            print_table([f"{title} at", "reason".ljust(width)], [[str(i.place), i.reason.ljust(width)] for i in shown])
            if len(issues) > MAX_ROWS:
                print(f"... and {len(issues) - MAX_ROWS} more (all of them in --report-json)")
