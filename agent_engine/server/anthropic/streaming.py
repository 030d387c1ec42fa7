"""Streamed Messages replies: Anthropic's server-sent events for one call.

A stream is ``message_start``, ``ping``, then per content block ``content_block_start``,
``content_block_delta``s (``text_delta``; ``input_json_delta`` for ``tool_use``) and
``content_block_stop``, then ``message_delta`` (``stop_reason``, ``stop_sequence``, usage) and
``message_stop``. Every event is an ``event: NAME`` line and a ``data: {json}`` line.

Invariants:
- ``message_start`` is sent with the first engine output, so its usage carries the real prompt size and
  prefix-cache hit; ``message_delta`` repeats the (cumulative) usage with the final ``output_tokens``.
- At most one block is open at a time; every started block is stopped before ``message_delta``; block
  indexes count up from 0 with no gaps.
- The text a stream sends is the text ``reply.message_body`` would answer (the matched stop sequence is
  cut from the end; the engine holds back any tail that could still become one).
- A failure (an engine error, a failed step, an abort at shutdown) is one ``event: error`` and ends
  the stream; when the generator ends, fails or is cancelled (client gone) the request is aborted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agent_engine.engine.outputs import RequestOutput
from agent_engine.json_types import JsonObject
from agent_engine.server.anthropic.convert import json_object, stop_reason, to_anthropic_id
from agent_engine.server.anthropic.reply import MessagesCall, output_usage
from agent_engine.server.errors import anthropic_error_body
from agent_engine.server.groups import GroupEvent, RequestGroup
from agent_engine.server.sse import event_json
from agent_engine.server.tools import DeltaEvent, StreamingToolParser

Event = tuple[str, dict[str, Any]]


def sse_event(name: str, data: JsonObject) -> str:
    return f"event: {name}\ndata: {event_json(data)}\n\n"


@dataclass
class BlockWriter:
    """Turns text and tool-call pieces into content-block events (pure; one open block at a time)."""

    index: int = -1
    open_kind: str | None = None
    tool_use: bool = False
    events: list[Event] = field(default_factory=list)

    def text(self, delta: str) -> None:
        if not delta:
            return
        if self.open_kind != "text":
            self._start({"type": "text", "text": ""}, "text")
        self._delta({"type": "text_delta", "text": delta})

    def tool_call(self, call_id: str, name: str, arguments: str) -> None:
        """A whole parsed call; arguments that are not a JSON object go out as text (see ``convert``)."""
        if json_object(arguments) is None:
            self.text(arguments)
            arguments = "{}"
        self.tool_start(call_id, name)
        self.tool_arguments(arguments)

    def tool_start(self, call_id: str, name: str) -> None:
        self._start({"type": "tool_use", "id": to_anthropic_id(call_id), "name": name, "input": {}}, "tool_use")
        self.tool_use = True

    def tool_arguments(self, fragment: str) -> None:
        if fragment and self.open_kind == "tool_use":
            self._delta({"type": "input_json_delta", "partial_json": fragment})

    def close(self) -> None:
        if self.open_kind is not None:
            self.events.append(("content_block_stop", {"type": "content_block_stop", "index": self.index}))
            self.open_kind = None

    def take(self) -> list[Event]:
        out, self.events = self.events, []
        return out

    def _start(self, block: JsonObject, kind: str) -> None:
        self.close()
        self.index += 1
        self.open_kind = kind
        self.events.append(("content_block_start",
                            {"type": "content_block_start", "index": self.index, "content_block": block}))

    def _delta(self, delta: JsonObject) -> None:
        self.events.append(("content_block_delta",
                            {"type": "content_block_delta", "index": self.index, "delta": delta}))


@dataclass
class StreamProgress:
    """What the stream has sent so far."""

    started: bool = False
    sent_chars: int = 0
    writer: BlockWriter = field(default_factory=BlockWriter)
    parser: StreamingToolParser | None = None  # None: plain text


async def message_stream(call: MessagesCall, group: RequestGroup) -> AsyncIterator[str]:
    """The SSE events of ``call``; aborts its request when the stream ends or the client goes away."""
    p = StreamProgress(parser=call.parser.stream() if call.parser is not None else None)
    try:
        async for ev in group.events():
            error = _error_of(ev)
            if error is not None:
                yield sse_event("error", error)
                return
            assert ev.output is not None  # an event without an output is an error (see _error_of)
            for name, data in stream_events(call, ev.output, p):
                yield sse_event(name, data)
    finally:
        group.abort()


def stream_events(call: MessagesCall, out: RequestOutput, p: StreamProgress) -> list[Event]:
    """The events one engine output adds to the stream (``message_start`` with the first)."""
    events: list[Event] = []
    if not p.started:
        p.started = True
        events.append(("message_start", _message_start(call, out)))
        events.append(("ping", {"type": "ping"}))
    text, stop_sequence = call.visible_text(out) if out.finished else (out.outputs[0].text, None)
    _feed(p, text[p.sent_chars:])
    p.sent_chars = len(text)
    if out.finished:
        _finish(p, truncated=out.outputs[0].finish_reason == "length")
    events += p.writer.take()
    if out.finished:
        events.append(("message_delta", _message_delta(out, stop_sequence, p.writer.tool_use)))
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def _feed(p: StreamProgress, delta: str) -> None:
    if p.parser is None:
        p.writer.text(delta)
        return
    _apply(p.writer, p.parser.feed(delta))


def _finish(p: StreamProgress, truncated: bool) -> None:
    if p.parser is not None:
        _apply(p.writer, p.parser.finish(truncated))
    p.writer.close()


def _apply(writer: BlockWriter, deltas: list[DeltaEvent]) -> None:
    """Tool-parser events onto content blocks. The parser announces a call only once its whole block
    was read, so a ``tool_start`` and its ``tool_args`` come in one list: each call goes out whole."""
    call: DeltaEvent | None = None
    args: list[str] = []
    for d in [*deltas, DeltaEvent("content")]:  # the sentinel flushes the last call
        if d.kind == "tool_args" and call is not None:
            args.append(d.text)
            continue
        if call is not None:
            writer.tool_call(call.id, call.name, "".join(args))
            call, args = None, []
        if d.kind == "tool_start":
            call = d
        elif d.kind == "content":
            writer.text(d.text)
        else:  # arguments of a call announced earlier (not expected; never dropped)
            writer.tool_arguments(d.text)


def _message_start(call: MessagesCall, out: RequestOutput) -> JsonObject:
    message = call.head()
    message.update({"content": [], "stop_reason": None, "stop_sequence": None, "usage": output_usage(out)})
    return {"type": "message_start", "message": message}


def _message_delta(out: RequestOutput, stop_sequence: str | None, tool_use: bool) -> JsonObject:
    reason = stop_reason(out.outputs[0].finish_reason, stop_sequence, tool_use)
    return {"type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None if tool_use else stop_sequence},
            "usage": output_usage(out)}


def _error_of(ev: GroupEvent) -> JsonObject | None:
    if ev.error is not None:
        return anthropic_error_body(500, f"request failed: {ev.error}")
    if ev.output is None:
        return anthropic_error_body(503, "request aborted (server shutting down)")
    if ev.output.outputs[0].finish_reason == "error":
        return anthropic_error_body(500, "the model step failed for this request; it may be retried")
    return None
