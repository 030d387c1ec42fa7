"""Non-streamed Messages replies: wait for the call's request to finish, answer one ``message`` body.

Invariants: waiting, disconnects and failures go through the chat path's ``collect_finals`` /
``check_finals`` (the request always ends on the engine side; an aborted request is a 503, a failed
step a 500, both rendered as Anthropic errors by the app's handler); ``stop_reason`` is never null.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.anthropic.call import MessagesCall, output_usage
from agent_engine.server.anthropic.convert import reply_blocks, stop_reason
from agent_engine.server.groups import RequestGroup
from agent_engine.server.respond import CLIENT_GONE, check_finals, collect_finals


async def reply(call: MessagesCall, group: RequestGroup, request: Request) -> Response:
    """The ``message`` body of ``call`` once its request finished."""
    finals = await collect_finals(group, request)
    if finals is None:
        return Response(status_code=CLIENT_GONE)
    return JSONResponse(message_body(call, check_finals(finals)[0]))


def message_body(call: MessagesCall, out: RequestOutput) -> dict[str, Any]:
    """The full Anthropic ``message`` for a finished output."""
    text, stop_sequence = call.visible_text(out)
    content, tool_calls = call.parse(text)
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
