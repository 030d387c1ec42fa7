"""The HTTP edge's guards, pure ASGI (and one uvicorn protocol): what a request may cost before it is parsed.

Every limit of the edge is listed in docs/limits.md; the value checks are in ``server.request_limits``.

Body size and time (``BodyLimitMiddleware``): a body larger than ``state.max_body_bytes`` is a 413
before anything parses it, and one that has not fully arrived ``state.body_timeout`` seconds after the
headers is a 408 (a client trickling its body holds no handler). Pure ASGI. A declared
``Content-Length`` over the limit is refused at once, unread. Any other body is read up to the limit
and refused as soon as it passes it; one that fits is replayed to the app, after which ``receive`` is
the client's own again, so disconnects still reach the handlers. The error body is the API's own shape
(Anthropic's under ``/v1/messages``).

Body rate (``ByteBuckets``, with several tenants): each tenant's request bodies draw on a bucket of
bytes refilled at ``--tenant-body-rate``; a body the bucket cannot pay for is a 429 with
``Retry-After``, refused before it is read or parsed.

Header time (``header_deadline_protocol``): uvicorn waits for a request's headers without a limit, so a
client that opens connections and sends headers a byte at a time would hold them forever. The protocol
it returns closes a connection whose next request's headers are not complete ``timeout`` seconds after
the connection opened or after its first bytes arrived.

Content type (``JsonContentTypeMiddleware``): a POST under ``/v1/`` whose ``Content-Type`` is set to
anything but JSON (``application/json`` or ``*/*+json``) is a 400 ``unsupported_content_type`` that names
it; without a ``Content-Type`` the body is read as JSON.

Memory (``release_freed_memory``): after a body of ``TRIM_AFTER_BYTES`` or more, glibc's heap is trimmed.
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import threading
import time
from typing import Protocol

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_engine.server.errors import APIError

__all__ = ["BodyLimitMiddleware", "ByteBuckets", "JsonContentTypeMiddleware", "header_deadline_protocol",
           "release_freed_memory"]

TRIM_AFTER_BYTES = 1 << 20  # bodies this large are followed by a malloc_trim (see release_freed_memory)
_LAST_TRIM = [0.0]


class BodyLimits(Protocol):
    """What the body middleware reads of the server's state, per request (``ServerState``)."""

    max_body_bytes: int
    body_timeout: float
    body_buckets: ByteBuckets | None


class BodyLimitMiddleware:
    """413 for request bodies over ``state.max_body_bytes`` (read per request)."""

    def __init__(self, app: ASGIApp, state: BodyLimits) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = int(self.state.max_body_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(scope, limit)(scope, receive, send)
            return
        wait = self._over_byte_rate(scope, int(declared) if declared is not None else 0)
        if wait is not None:
            await _slow_down(scope, wait)(scope, receive, send)
            return
        timeout = float(self.state.body_timeout)
        try:
            body, more = await asyncio.wait_for(_read_upto(receive, limit), timeout)
        except TimeoutError:
            message = f"the request body did not arrive within {timeout:g} s (--body-timeout)"
            await _error(scope, 408, "request_timeout", "invalid_request_error", message)(scope, receive, send)
            return
        wait = None if body is None or declared is not None else self._over_byte_rate(scope, len(body))
        if wait is not None:
            await _slow_down(scope, wait)(scope, receive, send)
            return
        if body is None:
            await _too_large(scope, limit)(scope, receive, send)
            return
        try:
            await self.app(scope, _replay(body, more, receive), send)
        finally:
            if len(body) >= TRIM_AFTER_BYTES:
                release_freed_memory()


    def _over_byte_rate(self, scope: Scope, n_bytes: int) -> float | None:
        """Charge ``n_bytes`` to the tenant's byte bucket; the seconds to wait if it cannot pay (None: paid)."""
        buckets = self.state.body_buckets
        if buckets is None or not n_bytes:
            return None
        return buckets.charge((scope.get("state") or {}).get("tenant"), n_bytes, time.monotonic())


def release_freed_memory(min_interval_s: float = 1.0) -> None:
    """glibc only: hand the heap's free pages back to the system (``malloc_trim``), on a thread, at most
    once per ``min_interval_s``. A multi-megabyte body leaves its parse's memory free but resident
    (glibc raises its mmap threshold after freeing big blocks, so later big blocks land in the heap).
    Fixing the threshold instead cost 22-25% of serving tokens/s in ``bench serve`` (every large
    tensor of a step became its own mmap), so memory is trimmed after big bodies."""
    now = time.monotonic()
    if now - _LAST_TRIM[0] < min_interval_s:
        return
    _LAST_TRIM[0] = now
    threading.Thread(target=_malloc_trim, name="malloc-trim", daemon=True).start()


def _malloc_trim() -> None:
    """Trim now and once more a second later (what the request still held when it ended is free by then)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
    time.sleep(1.0)
    trim(0)


class ByteBuckets:
    """Per-tenant token buckets of request-body bytes: each holds at most ``capacity`` bytes and refills at
    ``rate`` bytes a second. Parsing a body costs the event loop time in proportion to its bytes, so a
    tenant sending multi-megabyte bodies in a loop is slowed to ``rate`` while others' small bodies pass."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = float(rate), float(capacity)
        self._level: dict[str | None, tuple[float, float]] = {}  # tenant -> (bytes, at)

    def charge(self, tenant: str | None, n_bytes: int, now: float) -> float | None:
        """Take ``n_bytes`` from ``tenant``'s bucket: None when it had them, else the seconds until it will."""
        level, at = self._level.get(tenant, (self.capacity, now))
        level = min(self.capacity, level + (now - at) * self.rate)
        if level < n_bytes:
            self._level[tenant] = (level, now)
            return (min(n_bytes, self.capacity) - level) / self.rate
        self._level[tenant] = (level - n_bytes, now)
        return None


def _slow_down(scope: Scope, wait: float) -> JSONResponse:
    message = "this key is sending request bodies faster than its share (--tenant-body-rate); retry later"
    response = _error(scope, 429, "rate_limit_exceeded", "rate_limit_error", message)
    response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return response


async def _read_upto(receive: Receive, limit: int) -> tuple[bytes | None, bool]:
    """The whole body if it fits (None if it does not); ``more`` is False once the body is complete."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None, False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def header_deadline_protocol(timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class, closing connections whose request headers take over ``timeout`` s."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class HeaderDeadlineProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _cycle_at_arm: object = None  # the protocol's request cycle when the deadline was armed

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self._between_requests():
                self._arm()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            self._cycle_at_arm = self.cycle
            self._deadline = self.loop.call_later(timeout, self._expire)

        def _expire(self) -> None:
            self._deadline = None
            stalled = self.cycle is self._cycle_at_arm and self._between_requests()
            if stalled and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


class JsonContentTypeMiddleware:
    """400 for a ``/v1/`` POST whose declared body type is not JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path", "").startswith("/v1/"):
            declared = dict(scope.get("headers") or []).get(b"content-type")
            media = (declared or b"").split(b";")[0].strip().lower().decode("latin-1")
            if declared is None:
                scope["headers"] = [*scope.get("headers", ()), (b"content-type", b"application/json")]
            elif media != "application/json" and not media.endswith("+json"):
                await _error(scope, 400, "unsupported_content_type", "invalid_request_error",
                             f"Content-Type {media or declared.decode('latin-1')!r} is not supported: send the "
                             f"body as JSON with 'Content-Type: application/json'")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _too_large(scope: Scope, limit: int) -> JSONResponse:
    message = f"the request body is larger than {limit} bytes (--max-body-bytes)"
    return _error(scope, 413, "request_too_large", "request_too_large", message)


def _error(scope: Scope, status: int, code: str, anthropic_type: str, message: str) -> JSONResponse:
    """The API's own error body: Anthropic's under ``/v1/messages``, OpenAI's elsewhere."""
    if scope.get("path", "").startswith("/v1/messages"):
        return JSONResponse({"type": "error", "error": {"type": anthropic_type, "message": message}},
                            status_code=status)
    return JSONResponse(APIError(status, message, code=code).body(), status_code=status)
