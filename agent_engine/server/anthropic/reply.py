"""One ``/v1/messages`` call (``MessagesCall``: what its full body and its stream share) and its
non-streamed reply (one ``message`` body once the call's request finished).

Call invariants: one call per HTTP request, made before anything is submitted; every response object
starts with ``head`` (same ``msg_`` id and model); the model's text is read through ``parse`` (tool
calls parsed only when the request offered tools and did not say ``tool_choice: none``) after the
matched stop sequence was cut off (``split_stop``).

Reply invariants: waiting, disconnects and failures go through the chat path's ``collect_finals`` /
``check_finals`` (the request always ends on the engine side; an aborted request is a 503, a failed
step a 500, both rendered as Anthropic errors by the app's handler); ``stop_reason`` is never null.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from agent_engine.engine.outputs import RequestOutput
from agent_engine.json_types import JsonObject, JsonValue
from agent_engine.server.anthropic.convert import ChatForm, reply_blocks, split_stop, stop_reason, usage
from agent_engine.server.anthropic.schema import MessagesRequest
from agent_engine.server.groups import RequestGroup
from agent_engine.server.openai_reply import CLIENT_GONE, check_finals, collect_finals
from agent_engine.server.tools import ToolParser


@dataclass
class MessagesCall:
    """One Messages API call (streamed or not)."""

    req: MessagesRequest
    form: ChatForm
    model: str
    parser: ToolParser | None = None  # None: the reply is plain text (no tools, or tool_choice none)
    id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")

    def head(self) -> JsonObject:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model}

    def visible_text(self, out: RequestOutput) -> tuple[str, str | None]:
        """The output's text without a matched stop sequence, and that sequence (None if none)."""
        comp = out.outputs[0]
        return split_stop(comp.text, comp.finish_reason, self.req.stop_sequences)

    def parse(self, text: str, truncated: bool = False) -> tuple[str | None, list[JsonValue]]:
        """``(content, tool calls)`` of a finished text (``truncated``: cut by ``max_tokens``)."""
        if self.parser is None:
            return text, []
        parsed = self.parser.parse(text, truncated)
        return parsed.content, list(parsed.tool_calls)


def output_usage(out: RequestOutput) -> dict[str, int]:
    """Anthropic usage of one engine output so far."""
    return usage(len(out.prompt_token_ids), out.num_cached_tokens, len(out.outputs[0].token_ids))


async def reply(call: MessagesCall, group: RequestGroup, request: Request) -> Response:
    """The ``message`` body of ``call`` once its request finished."""
    finals = await collect_finals(group, request)
    if finals is None:
        return Response(status_code=CLIENT_GONE)
    return JSONResponse(message_body(call, check_finals(finals)[0]))


def message_body(call: MessagesCall, out: RequestOutput) -> JsonObject:
    """The full Anthropic ``message`` for a finished output."""
    text, stop_sequence = call.visible_text(out)
    content, tool_calls = call.parse(text, out.outputs[0].finish_reason == "length")
    blocks = reply_blocks(content, tool_calls)
    has_tool_use = any(b["type"] == "tool_use" for b in blocks)
    body = call.head()
    body.update({
        "content": blocks,
        "stop_reason": stop_reason(out.outputs[0].finish_reason, stop_sequence, has_tool_use),
        "stop_sequence": None if has_tool_use else stop_sequence,
        "usage": output_usage(out),
    })
    return body
