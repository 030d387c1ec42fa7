"""One HTTP request, carried as plain data between processes, run against an ASGI app in-process.

The ingress turns the client's request into a ``ProxiedRequest`` (method, path, query, headers, body);
the replica runs it through the very app the single server serves (``server.app.build_app``) with
``stream_asgi`` and yields what the app sends: one ``ResponseStart`` (status, headers), then the body
as ``bytes`` chunks. Everything here is picklable data and asyncio, no Ray.

Invariants:
- The app sees one ``http.request`` message with the whole body, then ``http.disconnect`` only once
  the caller stops listening (the generator is closed or cancelled: the client went away), so the
  single server's disconnect handling (abort the engine requests) runs unchanged.
- The generator yields exactly one ``ResponseStart`` before any body chunk; an app that fails
  before it started a response yields a 500 with an OpenAI error body instead.
- When the generator ends (finished, closed or cancelled), the app's task has ended too: it gets
  ``cleanup_timeout`` seconds to finish after the disconnect, then it is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Scope

logger = logging.getLogger(__name__)

_END = object()


@dataclass(frozen=True)
class ProxiedRequest:
    """An HTTP request as data: header names lower-case bytes, the whole body read."""

    method: str
    path: str
    query_string: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    client: tuple[str, int] = ("127.0.0.1", 0)

    def header(self, name: str) -> str | None:
        key = name.lower().encode()
        return next((v.decode("latin-1") for k, v in self.headers if k == key), None)


@dataclass(frozen=True)
class ResponseStart:
    """The status line and headers of a response."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...] = field(default=())

    def header(self, name: str) -> str | None:
        key = name.lower().encode()
        return next((v.decode("latin-1") for k, v in self.headers if k.lower() == key), None)


def _scope(req: ProxiedRequest) -> Scope:
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": req.method.upper(), "scheme": "http", "path": req.path, "raw_path": req.path.encode(),
        "query_string": req.query_string, "root_path": "", "headers": list(req.headers),
        "client": req.client, "server": ("127.0.0.1", 0),
    }


def error_start_and_body(status: int, message: str, code: str) -> tuple[ResponseStart, bytes]:
    """A JSON OpenAI-style error response."""
    err_type = {503: "service_unavailable_error"}.get(status, "internal_server_error" if status >= 500
                                                      else "invalid_request_error")
    body = json.dumps({"error": {"message": message, "type": err_type, "param": None, "code": code}}).encode()
    return ResponseStart(status, ((b"content-type", b"application/json"),
                                  (b"content-length", str(len(body)).encode()))), body


async def stream_asgi(app: ASGIApp, req: ProxiedRequest, cleanup_timeout: float = 5.0
                      ) -> AsyncIterator[ResponseStart | bytes]:
    """Run ``req`` through ``app``; yield its ``ResponseStart``, then its body chunks (see the module doc)."""
    queue: asyncio.Queue[Message | object] = asyncio.Queue()  # messages, then ``_END``
    gone = asyncio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": req.body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        queue.put_nowait(message)

    task = asyncio.ensure_future(app(_scope(req), receive, send))
    task.add_done_callback(lambda _: queue.put_nowait(_END))
    started = False
    try:
        while True:
            msg = await queue.get()
            if msg is _END:
                break
            if msg["type"] == "http.response.start":
                started = True
                headers = tuple((bytes(k), bytes(v)) for k, v in msg.get("headers", ()))
                yield ResponseStart(int(msg["status"]), headers)
            elif msg["type"] == "http.response.body":
                if msg.get("body"):
                    yield bytes(msg["body"])
                if not msg.get("more_body", False):
                    break
        if not started:
            start, body = error_start_and_body(500, f"the replica's app failed: {_failure(task)}",
                                               "replica_error")
            yield start
            yield body
    finally:
        gone.set()
        await _settle(task, cleanup_timeout)


def _failure(task: asyncio.Future[None]) -> str:
    if not task.done() or task.cancelled():
        return "no response"
    exc = task.exception()
    return f"{type(exc).__name__}: {exc}" if exc is not None else "no response"


async def _settle(task: asyncio.Future[None], timeout: float) -> None:
    """Let the app task end on its own (it saw the disconnect), else cancel it; never raises."""
    if not task.done():
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), timeout)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    elif not task.cancelled() and task.exception() is not None:
        logger.debug("replica app task failed", exc_info=task.exception())


async def collect(app: ASGIApp, req: ProxiedRequest) -> tuple[ResponseStart, bytes]:
    """The whole response of ``req`` (for small answers: health, metrics, job release)."""
    start: ResponseStart | None = None
    chunks: list[bytes] = []
    async for item in stream_asgi(app, req):
        if isinstance(item, ResponseStart):
            start = item
        else:
            chunks.append(item)
    assert start is not None
    return start, b"".join(chunks)
