"""The limits of the request edge: the body size, and the value checks both APIs' request models share.

Every limit of the edge (these, job ids, ``top_k`` against the vocabulary) is listed in docs/limits.md.

Body size (``BodyLimitMiddleware``): a body larger than ``state.max_body_bytes`` is a 413 before anything
parses it. Pure ASGI. A declared ``Content-Length`` over the limit is refused at once, unread. A body without one
(chunked) is read up to the limit and refused as soon as it passes it; one that fits is replayed to the
app, after which ``receive`` is the client's own again, so disconnects still reach the handlers. The
413 body is the API's own error shape (Anthropic's under ``/v1/messages``).

Values: ``StrictBool``/``StrictInt`` refuse ``"yes"`` for a boolean and ``"5"`` or ``5.0`` for an
integer; ``FiniteFloat`` refuses NaN and infinities (JSON's ``NaN`` / ``Infinity`` literals, which
Python's parser accepts). ``reject_lone_surrogates`` is a pydantic ``mode="before"`` model validator: a
string anywhere in the body that is not valid Unicode (a lone UTF-16 surrogate such as ``"\\ud800"``)
is a validation error naming its place, instead of a failure deep in tokenization.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi.responses import JSONResponse
from pydantic import Field, StrictBool, StrictInt

from agent_engine.server.errors import APIError

__all__ = ["BodyLimitMiddleware", "FiniteFloat", "StrictBool", "StrictInt", "find_lone_surrogate",
           "reject_lone_surrogates"]

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class BodyLimitMiddleware:
    """413 for request bodies over ``state.max_body_bytes`` (read per request)."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = int(self.state.max_body_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > limit:
                await _too_large(scope, limit)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        body, more = await _read_upto(receive, limit)
        if body is None:
            await _too_large(scope, limit)(scope, receive, send)
            return
        await self.app(scope, _replay(body, more, receive), send)


async def _read_upto(receive: Any, limit: int) -> tuple[bytes | None, bool]:
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


def _replay(body: bytes, more: bool, receive: Any) -> Any:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def _too_large(scope: dict[str, Any], limit: int) -> JSONResponse:
    message = f"the request body is larger than {limit} bytes (--max-body-bytes)"
    if scope.get("path", "").startswith("/v1/messages"):
        return JSONResponse({"type": "error", "error": {"type": "request_too_large", "message": message}},
                            status_code=413)
    return JSONResponse(APIError(413, message, code="request_too_large").body(), status_code=413)


def find_lone_surrogate(value: Any, path: str = "body") -> str | None:
    """The path of the first string in ``value`` (nested dicts and lists) that is not valid Unicode."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
            stack.extend((k, f"{where} key") for k in item if isinstance(k, str))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def reject_lone_surrogates(data: Any) -> Any:
    """``mode="before"`` validator: the data unchanged, or ValueError naming the bad string's place."""
    where = find_lone_surrogate(data)
    if where is not None:
        raise ValueError(f"{where} is not valid Unicode (a lone surrogate); send UTF-8 text")
    return data
