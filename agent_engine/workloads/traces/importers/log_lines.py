"""Read a JSONL log as ``(Place, object)`` records, one line at a time; every unusable line becomes a
reported drop.

Invariants: lines are streamed (a log's size does not bound memory); blank lines are skipped silently
(they carry nothing); a line that is not UTF-8, not JSON or not a JSON object is dropped with its place
and reason; a last line without a newline that fails to parse is reported as truncated. Nothing here
raises on file content; an unreadable file raises ``ValueError`` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.importers.report import ImportReport, Place

__all__ = ["read_records"]


def read_records(path: Path, label: str, report: ImportReport) -> Iterator[tuple[Place, JsonObject]]:
    """The JSON objects of ``path`` with their places (``label`` names the file in places)."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise ValueError(f"{label}: cannot read: {e.strerror or e}") from None
    with f:
        for i, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            report.lines_read += 1
            place = Place(label, i)
            obj = _parse(raw, truncated=not raw.endswith(b"\n"), place=place, report=report)
            if obj is not None:
                yield place, obj


def _parse(raw: bytes, truncated: bool, place: Place, report: ImportReport) -> JsonObject | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        report.drop(place, "not UTF-8 text")
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        reason = "truncated last line (no newline, incomplete JSON)" if truncated else f"bad JSON: {e.msg}"
        report.drop(place, reason)
        return None
    if not isinstance(obj, dict):
        report.drop(place, f"a line must be a JSON object, got {type(obj).__name__}")
        return None
    return obj
