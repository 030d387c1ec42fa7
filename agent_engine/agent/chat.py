"""One chat completion against an OpenAI-compatible server, streamed (SSE) or not.

Invariants: ``stream_chat`` raises on any failure (HTTP status, in-stream error); ``ttft`` is set only
when streamed, from the first non-empty content delta; ``queue_delay`` is the server's own figure
when it reports one; ``job_id`` is what the server echoed (None when it echoed none);
``tool_calls`` are the answer's calls as OpenAI dicts (streamed fragments joined by their index).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_engine.workloads.sse_client import iter_sse_chunks, server_queue_delay

__all__ = ["ChatReply", "stream_chat"]


@dataclass
class ChatReply:
    """What one chat completion returned (``ttft`` only when streamed)."""

    text: str = ""
    ttft: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    queue_delay: float | None = None
    finish_reason: str | None = None
    job_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _take_usage(reply: ChatReply, usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    reply.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    reply.output_tokens = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    reply.cached_tokens = None if cached is None else int(cached)


async def stream_chat(client: httpx.AsyncClient, body: dict[str, Any], sent: float,
                      headers: dict[str, str] | None = None) -> ChatReply:
    """POST ``body`` (with extra ``headers``) to ``/v1/chat/completions`` (SSE when ``body["stream"]``);
    raises on any failure."""
    reply = ChatReply()
    if not body.get("stream"):
        resp = await client.post("/v1/chat/completions", json=body, headers=headers)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        reply.text, reply.tool_calls = message.get("content") or "", list(message.get("tool_calls") or [])
        reply.finish_reason, reply.job_id = choice.get("finish_reason"), data.get("job_id")
        _take_usage(reply, data.get("usage"))
        reply.queue_delay = server_queue_delay(data)
        return reply
    parts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as resp:
        async for chunk in iter_sse_chunks(resp):
            reply.job_id = chunk.get("job_id", reply.job_id)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or ""
                if text and reply.ttft is None:
                    reply.ttft = time.perf_counter() - sent
                parts.append(text)
                _join_call_deltas(calls, (choice.get("delta") or {}).get("tool_calls") or [])
                reply.finish_reason = choice.get("finish_reason") or reply.finish_reason
            _take_usage(reply, chunk.get("usage"))
            q = server_queue_delay(chunk)
            if q is not None:
                reply.queue_delay = q
    reply.text = "".join(parts)
    reply.tool_calls = [calls[i] for i in sorted(calls)]
    return reply


def _join_call_deltas(calls: dict[int, dict[str, Any]], deltas: list[dict[str, Any]]) -> None:
    """Add streamed tool-call fragments: the first names the call, later ones extend its arguments."""
    for d in deltas:
        call = calls.setdefault(int(d.get("index", len(calls))),
                                {"id": None, "type": "function", "function": {"name": None, "arguments": ""}})
        call["id"] = d.get("id") or call["id"]
        fn = d.get("function") or {}
        call["function"]["name"] = fn.get("name") or call["function"]["name"]
        call["function"]["arguments"] += fn.get("arguments") or ""
