"""Our own trace JSONL (one job a line, see ``traces.format``), possibly invalid: repair what can be.

Read: every key of the format (unknown keys are kept). A ``tool_seconds`` that is missing or ``null``
before the last turn is unknown: the repair step imputes it and flags the turn. Repairs made here,
each noted with the line's place: a missing job id becomes ``<file name>:<line>``, a numeric one a
string; a ``tool_seconds`` that is not a finite number becomes unknown; one on the last turn is
cleared; a bad ``cached_tokens`` or ``llm_seconds`` becomes ``null``. A shrinking prompt is left to
the repair step (it splits the job into segments).

Not repairable (the line is dropped with the reason): no ``turns`` list or an empty one, a turn that is
not an object, ``prompt_tokens`` not an integer >= 1, ``output_tokens`` not an integer >= 0, a
``tool_name`` that is neither a string nor null.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.format import TraceFormatError, TraceTurn
from agent_engine.workloads.traces.importers.raw import RawJob
from agent_engine.workloads.traces.importers.report import ImportReport, LineError, Place

__all__ = ["SHAPE", "matches", "parse"]

SHAPE = "trace"


def matches(obj: JsonObject) -> bool:
    """A trace job line has a ``turns`` list."""
    return isinstance(obj.get("turns"), list)


def _is_int(x: Any, low: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _is_seconds(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _job_id(obj: JsonObject, place: Place, notes: list[str]) -> str:
    jid = obj.get("job_id")
    if isinstance(jid, str) and jid:
        return jid
    if _is_int(jid, -(2**63)):
        notes.append(f"job_id {jid} written as a string")
        return str(jid)
    name = f"{Path(place.file).name}:{place.line}"
    notes.append(f"no usable job_id ({jid!r}): named {name}")
    return name


def _turn(i: int, d: Any, last: bool, notes: list[str]) -> TraceTurn:
    if not isinstance(d, dict):
        raise LineError(f"turn {i} is not an object")
    try:
        t = TraceTurn.from_dict(d)
    except TraceFormatError as e:
        raise LineError(f"turn {i}: {e}") from None
    if not _is_int(t.prompt_tokens, 1):
        raise LineError(f"turn {i}: prompt_tokens must be an int >= 1, got {t.prompt_tokens!r}")
    if not _is_int(t.output_tokens, 0):
        raise LineError(f"turn {i}: output_tokens must be an int >= 0, got {t.output_tokens!r}")
    if t.tool_name is not None and not isinstance(t.tool_name, str):
        raise LineError(f"turn {i}: tool_name must be a string or null, got {t.tool_name!r}")
    if last and t.tool_seconds is not None:
        notes.append(f"turn {i}: tool_seconds {t.tool_seconds!r} after the last turn cleared")
        t.tool_seconds = None
    elif not last and t.tool_seconds is not None and not _is_seconds(t.tool_seconds):
        notes.append(f"turn {i}: tool_seconds {t.tool_seconds!r} is not a number: unknown")
        t.tool_seconds = None
    if t.cached_tokens is not None and not _is_int(t.cached_tokens, 0):
        notes.append(f"turn {i}: cached_tokens {t.cached_tokens!r} cleared")
        t.cached_tokens = None
    if t.llm_seconds is not None and not (_is_seconds(t.llm_seconds) and t.llm_seconds >= 0):
        notes.append(f"turn {i}: llm_seconds {t.llm_seconds!r} cleared")
        t.llm_seconds = None
    return t


def parse(place: Place, obj: JsonObject, report: ImportReport) -> RawJob:
    """One trace line as a ``RawJob`` (raises ``LineError`` when it cannot be repaired)."""
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise LineError("a job needs a non-empty 'turns' list")
    notes: list[str] = []
    parsed = [_turn(i, d, i == len(turns) - 1, notes) for i, d in enumerate(turns)]
    job_id = _job_id(obj, place, notes)
    for n in notes:  # only once the whole line is usable
        report.note(place, n)
    meta = {k: v for k, v in obj.items() if k not in ("job_id", "turns")}
    return RawJob(job_id, parsed, [place] * len(parsed), meta)
