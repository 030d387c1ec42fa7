"""One logged model call, whatever the log's shape, and the helpers both message-log readers share.

A ``Call`` is what the grouping step needs: where it came from, its job id (if the log names one),
its start and end time, token counts, the tool its answer called and fingerprints of its messages and
answer (for prefix chaining when no id is given).

Invariants:
- ``start`` is seconds (a float); numbers above ``MS_THRESHOLD`` are read as milliseconds; ISO-8601
  strings without a zone are UTC. ``end`` is ``None`` (unknown) or ``>= start``; bad, negative or
  missing times raise ``LineError`` (the line is dropped with that reason).
- A message's fingerprint depends on its role, text and tool calls (name and arguments, parsed JSON
  compared canonically) only: ids, ``cache_control`` and other annotations do not change it, so the
  answer of one call matches its copy in the next call's messages.
- Estimated token counts are ``ceil(chars / 4)`` (at least 1 for a prompt) over text and tool-call
  arguments; a call with any estimated count has ``estimated = True``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.importers.report import LineError, Place
from estimator.tool_parser import parse_tool_call

__all__ = [
    "END_KEYS", "GROUP_KEYS", "MS_THRESHOLD", "START_KEYS", "Call", "estimate_tokens", "first_int",
    "group_id", "make_call", "message_chars", "message_key", "read_times", "tool_name_of",
]

GROUP_KEYS = ("job_id", "session_id", "conversation_id", "thread_id")
START_KEYS = ("start_time", "startTime", "timestamp", "created", "created_at")
END_KEYS = ("end_time", "endTime")
DURATION_KEYS = ("duration", "latency")
MS_THRESHOLD = 1e11  # epoch seconds stay below this until the year 5138


@dataclass
class Call:
    """One model call of a message log (see the module docstring)."""

    place: Place
    group: str | None
    start: float
    end: float | None
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int | None
    estimated: bool
    tool_name: str | None
    msg_keys: tuple[str, ...]
    roles: tuple[str, ...]
    answer_key: str
    model: str | None
    shape: str


def group_id(obj: JsonObject, request: JsonObject) -> str | None:
    """The job id: the first of ``GROUP_KEYS`` in the line, its ``metadata``, or the request's ``metadata``."""
    for scope in (obj, obj.get("metadata"), request, request.get("metadata")):
        if not isinstance(scope, dict):
            continue
        for key in GROUP_KEYS:
            v = scope.get(key)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
                return str(v)
    return None


def _parse_time(v: Any, key: str) -> float:
    if isinstance(v, bool):
        raise LineError(f"{key} is not a time: {v!r}")
    if isinstance(v, (int, float)):
        t = float(v)
    elif isinstance(v, str):
        try:
            t = float(v)
        except ValueError:
            try:
                dt = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
            except ValueError:
                raise LineError(f"{key} is not a time: {v[:40]!r}") from None
            t = (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()
    else:
        raise LineError(f"{key} is not a time: {type(v).__name__}")
    if not math.isfinite(t) or t < 0:
        raise LineError(f"{key} is negative or not finite: {v!r}")
    return t / 1000.0 if t > MS_THRESHOLD else t


def _first(scopes: tuple[Any, ...], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for scope in scopes:
        if isinstance(scope, dict):
            for key in keys:
                if scope.get(key) is not None:
                    return key, scope[key]
    return None


def read_times(obj: JsonObject, response: Any) -> tuple[float, float | None]:
    """``(start, end)`` of a call: ``START_KEYS`` then ``END_KEYS`` or start + ``DURATION_KEYS`` seconds,
    looked up in the line first, then in its response object."""
    scopes = (obj, response)
    found = _first(scopes, START_KEYS)
    if found is None:
        raise LineError(f"no timestamp (one of {', '.join(START_KEYS)})")
    start = _parse_time(found[1], found[0])
    end_found = _first(scopes, END_KEYS)
    if end_found is not None:
        end = _parse_time(end_found[1], end_found[0])
    else:
        dur = _first(scopes, DURATION_KEYS)
        if dur is None:
            return start, None
        if isinstance(dur[1], bool) or not isinstance(dur[1], (int, float)) or not math.isfinite(dur[1]):
            raise LineError(f"{dur[0]} is not a number of seconds: {dur[1]!r}")
        end = start + float(dur[1])
    if end < start:
        raise LineError(f"{end_found[0] if end_found else 'duration'} is before the start")
    return start, end


def first_int(scope: Any, *keys: str) -> int | None:
    """The first of ``keys`` in ``scope`` that holds a non-negative integer (``None`` if none does)."""
    if not isinstance(scope, dict):
        return None
    for key in keys:
        v = scope.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def estimate_tokens(chars: int, minimum: int = 0) -> int:
    """``ceil(chars / 4)``, at least ``minimum``."""
    return max(minimum, math.ceil(chars / 4))


def _canonical_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def _parts(content: Any) -> list[list[str]]:
    """Content (a string, a list of parts or blocks, or None) as comparable ``[kind, ...]`` items."""
    if content is None:
        return []
    if isinstance(content, str):
        return [["text", content]] if content else []
    if not isinstance(content, list):
        return [["other", _canonical_args(content)]]
    out: list[list[str]] = []
    for part in content:
        if isinstance(part, str):
            out.append(["text", part])
        elif not isinstance(part, dict):
            continue
        elif part.get("type") in (None, "text", "input_text", "output_text") and isinstance(part.get("text"), str):
            out.append(["text", part["text"]])
        elif part.get("type") == "tool_use":
            out.append(["call", str(part.get("name")), _canonical_args(part.get("input"))])
        elif part.get("type") == "tool_result":
            out += [["result", *p] for p in _parts(part.get("content"))]
        else:
            rest = {k: v for k, v in part.items() if k not in ("cache_control", "id")}
            out.append(["other", _canonical_args(rest)])
    return out


def _calls(msg: JsonObject) -> list[list[str]]:
    calls = msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else []
    if isinstance(msg.get("function_call"), dict):
        calls = [*calls, {"function": msg["function_call"]}]
    out = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) and isinstance(c.get("function"), dict) else c
        if isinstance(fn, dict):
            out.append(["call", str(fn.get("name")), _canonical_args(fn.get("arguments"))])
    return out


def _items(msg: Any) -> tuple[str, list[list[str]]]:
    if not isinstance(msg, dict):
        return "unknown", [["other", _canonical_args(msg)]]
    return str(msg.get("role", "unknown")), _parts(msg.get("content")) + _calls(msg)


def message_key(msg: Any) -> tuple[str, str]:
    """``(role, fingerprint)`` of a message (see the module invariants)."""
    role, items = _items(msg)
    blob = json.dumps([role, items], ensure_ascii=False, separators=(",", ":"))
    return role, hashlib.sha1(blob.encode("utf-8")).hexdigest()


def message_chars(msg: Any) -> int:
    """Characters of a message's text and tool-call names and arguments (for token estimates)."""
    _, items = _items(msg)
    return sum(len(s) for item in items if item[0] != "other" for s in item[1:])


def tool_name_of(text: str | None, tool_calls: Any) -> str | None:
    """The trace tool name of an answer (``bash:<program>`` for shell functions and fenced blocks)."""
    call = parse_tool_call(text, tool_calls)
    return None if call is None else call.name


def make_call(
    place: Place,
    obj: JsonObject,
    parts: JsonObject,
    usage: tuple[int | None, int | None, int | None],
    shape: str,
) -> Call:
    """Assemble a ``Call`` from a parsed line.

    ``parts``: ``request``, ``response`` (dicts or None), ``messages`` (the prompt's messages, the
    system prompt first), ``answer`` (the answer as a message), ``extra_chars`` (prompt text outside the
    messages, e.g. tool schemas) and ``tool_name``. ``usage``: ``(prompt, output, cached)`` tokens as
    logged, ``None`` where absent (then estimated and flagged).
    """
    request, response, messages, answer = parts["request"], parts["response"], parts["messages"], parts["answer"]
    start, end = read_times(obj, response)
    prompt, output, cached = usage
    estimated = prompt is None or output is None
    if prompt is None:
        prompt = estimate_tokens(sum(message_chars(m) for m in messages) + parts["extra_chars"], minimum=1)
    if output is None:
        output = estimate_tokens(message_chars(answer))
    keys = [message_key(m) for m in messages]
    model = next((s.get("model") for s in (obj, request, response) if isinstance(s, dict)
                  and isinstance(s.get("model"), str)), None)
    return Call(
        place=place, group=group_id(obj, request), start=start, end=end, prompt_tokens=prompt,
        output_tokens=output, cached_tokens=None if cached is None else min(cached, prompt),
        estimated=estimated, tool_name=parts["tool_name"], msg_keys=tuple(k for _, k in keys),
        roles=tuple(r for r, _ in keys), answer_key=message_key(answer)[1], model=model, shape=shape,
    )


def split_call(obj: JsonObject, flat_key: str) -> tuple[JsonObject, Any]:
    """``(request, response)`` of a logged call, nested (``request`` / ``response``) or flat (the
    response's ``flat_key``, ``choices`` or ``content``, at the top level)."""
    request = obj["request"] if isinstance(obj.get("request"), dict) else obj
    response = obj.get("response")
    if response is None and isinstance(obj.get(flat_key), list):
        response = obj
    return request, response


def usage_of(obj: JsonObject, response: Any) -> JsonObject:
    """The call's ``usage`` object: the response's, else the line's, else empty."""
    for scope in (response, obj):
        if isinstance(scope, dict) and isinstance(scope.get("usage"), dict):
            return scope["usage"]
    return {}

