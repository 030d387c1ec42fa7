"""The answers of one OpenAI call: one JSON body (``respond``) or its server-sent events (``sse_stream``).

``collect_finals`` / ``check_finals`` (the wait for a call's final outputs) serve the Messages API's
non-streamed replies too.

Non-streamed invariants:
- The call's requests always end on the engine side: if the client disconnects first (a watcher reads
  ``http.disconnect``), if the wait fails, or once all finished, the group is aborted (a no-op then).
- A request that was aborted (shutdown) answers 503; one whose model step failed answers 500; a client
  that went away gets a bare 499 that nobody reads.
- A chat call with a tool parser answers the parsed text: ``message.tool_calls`` (when the model made
  calls; ``finish_reason`` is then "tool_calls") and ``content`` the text outside them (null when
  there is none beside calls, "" when there is none at all).

Streamed invariants:
- A stream is ``data: {chunk}`` events, then, if the client asked for usage and nothing failed, one
  usage chunk with no choices, then always ``data: [DONE]``.
- Each chunk carries one choice: the text (or chat delta) and tokens that request's output added since
  its previous chunk, so joining a request's deltas gives its full text; each index ends with exactly
  one chunk with a ``finish_reason`` ("abort" when the request was aborted).
- A failed request (a step error, or the engine loop died) becomes one error event and ends the stream.
- When the generator ends, fails or is cancelled (the client went away), the call's requests are aborted.
- A chat call with a tool parser streams the parsed output: content deltas, and ``delta.tool_calls``
  entries (``index``, ``id``, ``type``, ``function.name`` first, then ``function.arguments``); text that
  may still turn out to be a call is held back until it is known. Its finish chunk says "tool_calls"
  when calls were sent (not when the request was aborted). Joined, the deltas equal the non-streamed
  message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from agent_engine.engine.outputs import RequestOutput
from agent_engine.json_types import JsonObject
from agent_engine.server.errors import APIError, error_body
from agent_engine.server.groups import GroupEvent, RequestGroup
from agent_engine.server.openai_call import DONE, ApiCall, sse, usage
from agent_engine.server.state import CLIENT_CLOSED, wait_disconnect
from agent_engine.server.tools import StreamingToolParser, chunk_delta, openai_tool_calls

CLIENT_GONE = CLIENT_CLOSED


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
    watcher = asyncio.ensure_future(wait_disconnect(request))
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


async def _choice(call: ApiCall, index: int, out: RequestOutput) -> JsonObject:
    comp = out.outputs[0]
    choice: JsonObject = {"index": index, "finish_reason": comp.finish_reason,
                              "logprobs": await call.logprobs(out, 0)}
    if call.chat:
        cut = comp.finish_reason == "length"
        choice["message"] = _chat_message(call, comp.text, cut)
        if "tool_calls" in choice["message"] and not cut:
            choice["finish_reason"] = "tool_calls"
    else:
        choice["text"] = comp.text
    if call.req.return_token_ids:
        choice["token_ids"] = list(comp.token_ids)
        if not call.chat:
            choice["prompt_token_ids"] = list(out.prompt_token_ids)
    return choice


def _chat_message(call: ApiCall, text: str, cut: bool) -> JsonObject:
    if call.tools is None:
        return {"role": "assistant", "content": text}
    parsed = call.tools.parse(text, truncated=cut)
    if not parsed.tool_calls:
        return {"role": "assistant", "content": parsed.content or ""}
    return {"role": "assistant", "content": parsed.content, "tool_calls": openai_tool_calls(parsed.tool_calls)}


@dataclass
class _Progress:
    """What one request of the stream has sent so far."""

    sent_tokens: int = 0
    text_offset: int = 0
    started: bool = False
    prompt_tokens: int = 0
    cached_tokens: int = 0
    parser: StreamingToolParser | None = None
    called: bool = False


async def sse_stream(call: ApiCall, group: RequestGroup) -> AsyncIterator[str]:
    """The SSE events of ``call``; aborts the group's requests when the client goes away."""
    progress = [_Progress(parser=call.tools.stream() if call.tools is not None else None)
                for _ in group.request_ids]
    try:
        failed = False
        async for ev in group.events():
            error = _error_event_of(ev)
            if error is not None:
                yield error
                failed = True
                break
            chunk = await _event_chunk(call, ev, progress[ev.index])
            if chunk is not None:
                yield sse(chunk)
        if not failed and call.req.include_usage():
            yield sse(_usage_chunk(call, progress))
        yield DONE
    finally:
        group.abort()


def _error_event(status: int, message: str, code: str) -> str:
    """An OpenAI error object (with its HTTP status) as one SSE event."""
    err_type = "internal_server_error" if status >= 500 else "invalid_request_error"
    body = error_body(message, err_type, None, code)
    body["error"]["status_code"] = status
    return sse(body)


def _error_event_of(ev: GroupEvent) -> str | None:
    if ev.error is not None:
        return _error_event(500, f"request failed: {ev.error}", "engine_error")
    if ev.output is not None and ev.output.outputs[0].finish_reason == "error":
        return _error_event(500, "the model step failed for this request", "engine_step_failed")
    return None


async def _event_chunk(call: ApiCall, ev: GroupEvent, p: _Progress) -> JsonObject | None:
    """The chunk of one event, or None when the event adds nothing to what was sent."""
    out = ev.output
    choice: JsonObject = {"index": ev.index}
    if out is None:
        delta_text, new_ids, finish = "", [], "abort"
    else:
        delta_text, new_ids = await _advance(call, out, p, choice)
        finish = out.outputs[0].finish_reason
    text, tool_calls = _visible(p, delta_text, finish)
    _add_text(call, choice, text, tool_calls, first=not p.started)
    choice["finish_reason"] = "tool_calls" if p.called and finish not in (None, "abort", "length") else finish
    if not (delta_text or new_ids or finish or not p.started):
        return None
    p.started = True
    chunk = call.head(call.chunk_object_name)
    chunk["choices"] = [choice]
    if call.req.return_token_ids and call.chat and out is not None and p.sent_tokens == len(new_ids):
        chunk["prompt_token_ids"] = list(out.prompt_token_ids)
    return chunk


async def _advance(call: ApiCall, out: RequestOutput, p: _Progress,
                   choice: JsonObject) -> tuple[str, list[int]]:
    """Move ``p`` past ``out``'s new tokens, adding their logprobs (and ids) to ``choice``."""
    p.prompt_tokens = len(out.prompt_token_ids)
    p.cached_tokens = out.num_cached_tokens
    choice["logprobs"] = await call.logprobs(out, p.sent_tokens, p.text_offset)
    new_ids = list(out.outputs[0].token_ids[p.sent_tokens:])
    p.sent_tokens = len(out.outputs[0].token_ids)
    p.text_offset += len(out.new_text)
    if call.req.return_token_ids:
        choice["token_ids"] = new_ids
        if not p.started and not call.chat:
            choice["prompt_token_ids"] = list(out.prompt_token_ids)
    return out.new_text, new_ids


def _visible(p: _Progress, delta_text: str, finish: str | None) -> tuple[str, list[JsonObject]]:
    """The text and tool-call delta entries this chunk shows (all the text when there is no parser)."""
    if p.parser is None:
        return delta_text, []
    events = p.parser.feed(delta_text)
    if finish is not None:
        events += p.parser.finish(truncated=finish == "length")
    text, tool_calls = chunk_delta(events)
    p.called = p.called or bool(tool_calls)
    return text, tool_calls


def _add_text(call: ApiCall, choice: JsonObject, text: str, tool_calls: list[JsonObject],
              first: bool) -> None:
    if call.chat:
        delta: JsonObject = {"content": text if text or not tool_calls else None}
        if tool_calls:
            delta["tool_calls"] = tool_calls
        if first:
            delta["role"] = "assistant"
        choice["delta"] = delta
    else:
        choice["text"] = text


def _usage_chunk(call: ApiCall, progress: list[_Progress]) -> JsonObject:
    chunk = call.head(call.chunk_object_name)
    chunk["choices"] = []
    chunk["usage"] = usage(sum(p.prompt_tokens for p in progress), sum(p.sent_tokens for p in progress),
                           sum(p.cached_tokens for p in progress))
    return chunk
