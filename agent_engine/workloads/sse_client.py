"""Client side of the server's protocol: SSE ``data: {...}`` chunks, optional timing fields, job release.

Invariants: ``iter_sse_chunks`` raises on a non-200 status or an in-stream error and stops at
``[DONE]``; ``release_job`` never raises for an unreachable server (a job's end must not fail on it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx

from agent_engine.json_types import JsonObject

__all__ = ["QUEUE_DELAY_KEYS", "iter_sse_chunks", "release_job", "server_queue_delay"]


async def iter_sse_chunks(resp: httpx.Response) -> AsyncIterator[JsonObject]:
    """Yield each JSON chunk of a streamed response until ``data: [DONE]``.

    Raises RuntimeError on a non-200 status or an in-stream ``{"error": ...}`` event.
    """
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code}: {(await resp.aread()).decode(errors='replace')[:300]}")
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        chunk = json.loads(payload)
        if "error" in chunk:
            raise RuntimeError(f"server error: {chunk['error']}")
        yield chunk


# Names a server may use for a request's queueing delay (top level, or in ``metrics`` / ``usage``).
QUEUE_DELAY_KEYS = ("queue_delay", "queueing_delay", "queue_time")


def server_queue_delay(obj: JsonObject) -> float | None:
    """The queueing delay a response (or stream chunk) reports, or None if it reports none."""
    for holder in (obj, obj.get("metrics") or {}, obj.get("usage") or {}):
        for k in QUEUE_DELAY_KEYS:
            v = holder.get(k) if isinstance(holder, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


async def release_job(client: httpx.AsyncClient, job_id: str) -> None:
    """``DELETE /v1/jobs/{job_id}`` (the job's end: the server drops its pin); HTTP failures are ignored."""
    try:
        await client.delete(f"/v1/jobs/{quote(job_id, safe='')}")
    except httpx.HTTPError:
        pass
