"""Server-sent events: the one serialisation of an event's JSON data line, for every API.

Invariant: an event's data never contains a character that any common client splits lines on. JSON
escapes CR, LF and the other C0 controls itself, but keeps U+0085, U+2028 and U+2029 raw when
``ensure_ascii`` is off; line readers that follow ``str.splitlines`` (httpx's ``aiter_lines``, and
so clients built on it) would cut an event there and fail on half a JSON object. Those three are
written as ``\\u`` escapes (valid JSON, the same string once parsed); every other character stays as it
is (UTF-8, not ``\\u`` escapes, so a stream of non-Latin text stays small).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from agent_engine.json_types import JsonValue

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def event_json(data: Mapping[str, JsonValue]) -> str:
    """``data`` as compact JSON on one line by every client's reading (module docstring)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).translate(_LINE_BREAKS)
