"""Client side of the server's streaming protocol: OpenAI-style SSE ``data: {...}`` lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


async def iter_sse_chunks(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
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
