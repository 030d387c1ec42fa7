"""One chat completion against an OpenAI-compatible server, streamed (SSE) or not.

Invariants: ``stream_chat`` raises on any failure: ``ChatError`` for a refusal the server answered (an
HTTP status, an in-stream error), its ``context_exceeded`` true when the server said the prompt is too
long for the model's context (OpenAI's and vLLM's ``context_length_exceeded``, llama.cpp's
``exceed_context_size_error``, "maximum context length", ...); ``ttft`` is set only
when streamed, from the first non-empty content delta; ``queue_delay`` is the server's own figure
when it reports one; ``job_id`` is what the server echoed (None when it echoed none);
``tool_calls`` are the answer's calls as OpenAI dicts (streamed fragments joined by their index).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_engine.workloads.sse_client import iter_sse_chunks, server_queue_delay

__all__ = ["ChatError", "ChatReply", "stream_chat"]

DETAIL_CHARS = 4000  # characters of a refusal's body kept
_CONTEXT_REFUSAL = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|context length|max_model_len|"
    r"context size|context window|exceeds? the (?:model's |available )?context|prompt is too long|too many tokens",
    re.I)
_CONTEXT_SIZE = re.compile(
    r"(?:maximum context length is|max_model_len|context size|n_ctx)[\"']?\s*(?:of|is|=|:)?\s*\(?([0-9]{3,7})", re.I)


class ChatError(RuntimeError):
    """A request the server refused: its HTTP status (None: an error inside the stream) and its body."""

    def __init__(self, status: int | None, detail: str) -> None:
        self.status, self.detail = status, detail[:DETAIL_CHARS]
        super().__init__(f"HTTP {status}: {detail[:300]}" if status is not None else f"server error: {detail[:300]}")

    @property
    def context_exceeded(self) -> bool:
        """Whether the server refused the prompt as too long for the model's context."""
        return bool(_CONTEXT_REFUSAL.search(self.detail))

    @property
    def context_tokens(self) -> int | None:
        """The model's context length when the refusal states it, else None."""
        m = _CONTEXT_SIZE.search(self.detail)
        return int(m.group(1)) if m else None


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
            raise ChatError(resp.status_code, resp.text)
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
        if resp.status_code != 200:
            raise ChatError(resp.status_code, (await resp.aread()).decode(errors="replace"))
        async for chunk in _chunks(resp):
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


async def _chunks(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """``iter_sse_chunks`` with an in-stream error raised as ``ChatError``."""
    async for chunk in iter_sse_chunks(resp):
        if "error" in chunk:
            raise ChatError(None, json.dumps(chunk["error"]) if not isinstance(chunk["error"], str) else chunk["error"])
        yield chunk
