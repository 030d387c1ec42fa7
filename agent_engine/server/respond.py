"""Non-streamed responses: wait for every request of a call to finish, then answer one JSON body.

Invariants:
- The call's requests always end on the engine side: if the client disconnects first (a watcher reads
  ``http.disconnect``), if the wait fails, or once all finished, the group is aborted (a no-op then).
- A request that was aborted (shutdown) answers 503; one whose model step failed answers 500; a client
  that went away gets a bare 499 that nobody reads.
- A chat call with a tool parser answers the parsed text: ``message.tool_calls`` (when the model made
  calls; ``finish_reason`` is then "tool_calls") and ``content`` the text outside them (null when
  there is none beside calls, "" when there is none at all).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.call import ApiCall
from agent_engine.server.errors import APIError
from agent_engine.server.groups import RequestGroup
from agent_engine.server.responses import usage
from agent_engine.server.tools import openai_tool_calls

CLIENT_GONE = 499


async def respond(call: ApiCall, group: RequestGroup, request: Request) -> Response:
    """The full JSON response of ``call`` once every request of ``group`` finished."""
    finals = await collect_finals(group, request)
    if finals is None:
        return Response(status_code=CLIENT_GONE)
    outs = check_finals(finals)
    choices = [await _choice(call, i, out) for i, out in enumerate(outs)]
    body = call.head(call.object_name)
    body["choices"] = choices
    body["usage"] = usage(sum(len(o.prompt_token_ids) for o in outs),
                          sum(len(o.outputs[0].token_ids) for o in outs),
                          sum(o.num_cached_tokens for o in outs))
    if call.req.return_token_ids:
        pids = [list(o.prompt_token_ids) for o in outs]
        body["prompt_token_ids"] = pids[0] if len(pids) == 1 else pids
    return JSONResponse(body)


async def collect_finals(group: RequestGroup, request: Request) -> list[RequestOutput | None] | None:
    """Final output per index (None: aborted); None if the client disconnected (then all are aborted)."""
    finals: list[RequestOutput | None] = [None] * len(group.request_ids)
    work = asyncio.ensure_future(_consume(group, finals))
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            work.result()
            return finals
        return None
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()
        group.abort()


def check_finals(finals: list[RequestOutput | None]) -> list[RequestOutput]:
    """The finals, or the API error of the first request that was aborted or failed."""
    out = []
    for f in finals:
        if f is None:
            raise APIError(503, "request aborted (server shutting down)", code="aborted")
        if f.outputs[0].finish_reason == "error":
            raise APIError(500, "the model step failed for this request; it may be retried",
                           code="engine_step_failed")
        out.append(f)
    return out


async def _consume(group: RequestGroup, finals: list[RequestOutput | None]) -> None:
    """Fill ``finals`` from the group's events; an error event is a 500."""
    async for ev in group.events():
        if ev.error is not None:
            raise APIError(500, f"request failed: {ev.error}", code="engine_error")
        if ev.finished:
            finals[ev.index] = ev.output


async def _wait_disconnect(request: Request) -> None:
    """Return when the client goes away (the body has been read already, so receive() only reports that)."""
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            return


async def _choice(call: ApiCall, index: int, out: RequestOutput) -> dict[str, Any]:
    comp = out.outputs[0]
    choice: dict[str, Any] = {"index": index, "finish_reason": comp.finish_reason,
                              "logprobs": await call.logprobs(out, 0)}
    if call.chat:
        choice["message"] = _chat_message(call, comp.text)
        if "tool_calls" in choice["message"]:
            choice["finish_reason"] = "tool_calls"
    else:
        choice["text"] = comp.text
    if call.req.return_token_ids:
        choice["token_ids"] = list(comp.token_ids)
        if not call.chat:
            choice["prompt_token_ids"] = list(out.prompt_token_ids)
    return choice


def _chat_message(call: ApiCall, text: str) -> dict[str, Any]:
    if call.tools is None:
        return {"role": "assistant", "content": text}
    parsed = call.tools.parse(text)
    if not parsed.tool_calls:
        return {"role": "assistant", "content": parsed.content or ""}
    return {"role": "assistant", "content": parsed.content, "tool_calls": openai_tool_calls(parsed.tool_calls)}
