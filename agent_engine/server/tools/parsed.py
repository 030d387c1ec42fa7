"""The values the tool-call parsers produce (parsed calls, parsed outputs, streaming delta events) and
their OpenAI chat wire format (``message.tool_calls``, chunk deltas).

Invariants:
- A call id is ``call_`` + 24 lowercase hex characters, fresh for every parsed call.
- ``ParsedOutput.content`` is None, never "", when no text is left outside the calls.
- Joining the ``content`` events of a stream gives the parsed ``content`` (or "" for None); the
  ``tool_start`` / ``tool_args`` events of call ``index`` give its name and its full ``arguments``.
- On the wire, a streamed call's first delta entry carries its ``id``, ``type`` and ``function.name``
  (with ``arguments`` ""), later entries only ``index`` and ``function.arguments`` fragments; the
  events of one call within one chunk are merged into one entry, so a client that concatenates by
  ``index`` rebuilds exactly the non-streamed ``tool_calls``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from agent_engine.json_types import JsonObject

CALL_ID_PREFIX = "call_"

DeltaKind = Literal["content", "tool_start", "tool_args"]


def new_call_id() -> str:
    """A fresh OpenAI-style call id: ``call_`` + 24 hex characters."""
    return CALL_ID_PREFIX + uuid.uuid4().hex[:24]


@dataclass(frozen=True)
class ParsedToolCall:
    """One call parsed out of the model's text.

    ``arguments`` is the JSON text of an object, except for a call the request forced by name
    whose arguments the model did not write as a JSON object: then it is the model's raw text (as
    OpenAI documents, arguments may not be valid JSON; nothing the model wrote is dropped)."""

    id: str
    name: str
    arguments: str


@dataclass
class ParsedOutput:
    """A finished output: the text outside tool calls (None if empty) and the calls, in order."""

    content: str | None
    tool_calls: list[ParsedToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class DeltaEvent:
    """One step of a streamed parse.

    - ``content``: ``text`` is more visible text.
    - ``tool_start``: call number ``index`` (0, 1, ...) begins; ``id`` and ``name`` are set.
    - ``tool_args``: ``text`` is the next fragment of call ``index``'s arguments.
    """

    kind: DeltaKind
    text: str = ""
    index: int = -1
    id: str = ""
    name: str = ""


def openai_tool_calls(calls: list[ParsedToolCall]) -> list[JsonObject]:
    """The calls as OpenAI ``message.tool_calls`` objects."""
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls]


def chunk_delta(events: list[DeltaEvent]) -> tuple[str, list[JsonObject]]:
    """The content text and the ``delta.tool_calls`` entries of one chunk's events."""
    text = "".join(e.text for e in events if e.kind == "content")
    entries: list[JsonObject] = []
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
