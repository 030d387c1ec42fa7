"""Parsed calls and stream events in the OpenAI chat wire format (``message.tool_calls``, chunk deltas).

Invariants: a streamed call's first delta entry carries its ``id``, ``type`` and ``function.name``
(with ``arguments`` ""), later entries only ``index`` and ``function.arguments`` fragments; the events
of one call within one chunk are merged into one entry, so a client that concatenates by ``index``
rebuilds exactly the non-streamed ``tool_calls``.
"""

from __future__ import annotations

from typing import Any

from agent_engine.server.tools.types import DeltaEvent, ParsedToolCall


def openai_tool_calls(calls: list[ParsedToolCall]) -> list[dict[str, Any]]:
    """The calls as OpenAI ``message.tool_calls`` objects."""
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls]


def chunk_delta(events: list[DeltaEvent]) -> tuple[str, list[dict[str, Any]]]:
    """The content text and the ``delta.tool_calls`` entries of one chunk's events."""
    text = "".join(e.text for e in events if e.kind == "content")
    entries: list[dict[str, Any]] = []
    for e in events:
        if e.kind == "tool_start":
            entries.append({"index": e.index, "id": e.id, "type": "function",
                            "function": {"name": e.name, "arguments": ""}})
        elif e.kind == "tool_args":
            if entries and entries[-1]["index"] == e.index:
                entries[-1]["function"]["arguments"] += e.text
            else:
                entries.append({"index": e.index, "function": {"arguments": e.text}})
    return text, entries
