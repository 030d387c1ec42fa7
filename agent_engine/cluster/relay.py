"""Relaying one client request to an engine replica through the deployment handle, with retries.

``relay(handle, request, metrics)`` computes the request's ``RouteKey`` (job and prefix chain), calls
the replicas' streamed ``handle`` through the deployment handle (so the request router picks the
replica) and answers with the replica's own status, headers and body, chunk by chunk.

Invariants:
- Nothing reaches the client before the replica's status line AND its first body chunk (or its end)
  arrived. A replica that dies before that (Ray reports the actor dead or unavailable) costs nothing
  visible: the request is sent again, routed among the replicas still alive, at most ``MAX_ATTEMPTS``
  times in all; then the client gets a 503. So does a request that finds no replica up at all.
- A replica that dies after the client got bytes cannot be retried: an event stream ends with one
  error event (OpenAI: ``data: {"error": ...}`` then ``data: [DONE]``; Anthropic ``/v1/messages``:
  ``event: error``); any other body just ends. Errors the ingress answers itself use the body format
  of the API the path belongs to (Anthropic's for ``/v1/messages``, else OpenAI's).
- Whatever way the relay ends (done, failed, or the client went away: Ray cancels the task), the
  replica's call is cancelled, which disconnects the app's request on the replica (it aborts there).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.serve.exceptions import DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agent_engine.cluster.bridge import ProxiedRequest, ResponseStart, error_start_and_body
from agent_engine.cluster.cluster_metrics import ClusterMetrics
from agent_engine.cluster.route_key import route_key

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
RETRY_BACKOFF_S = 0.2
REPLICA_GONE = (RayActorError, ActorUnavailableError)
RETRYABLE = (*REPLICA_GONE, DeploymentUnavailableError)  # the last: no replica is up (yet)


class _Head:
    """What was read before answering: the start, the first body chunks, whether the body ended."""

    def __init__(self, start: ResponseStart, chunks: list[bytes], done: bool) -> None:
        self.start, self.chunks, self.done = start, chunks, done


async def _read_head(gen: DeploymentResponseGenerator) -> _Head:
    first = await gen.__anext__()
    if not isinstance(first, ResponseStart):
        raise RuntimeError(f"replica answered {type(first).__name__} before its status line")
    chunks: list[bytes] = []
    try:
        while not chunks:
            item = await gen.__anext__()
            if isinstance(item, bytes) and item:
                chunks.append(item)
    except StopAsyncIteration:
        return _Head(first, chunks, True)
    return _Head(first, chunks, False)


def _anthropic(path: str) -> bool:
    return path.rstrip("/").endswith(("/messages", "/messages/count_tokens"))


def error_response(status: int, message: str, code: str, path: str = "") -> Response:
    """An error answered by the ingress itself, in the body format of the API ``path`` belongs to."""
    if _anthropic(path):
        err_type = "overloaded_error" if status == 503 else "api_error"
        body = json.dumps({"type": "error", "error": {"type": err_type, "message": message}}).encode()
    else:
        body = error_start_and_body(status, message, code)[1]
    return Response(body, status_code=status, media_type="application/json")


async def relay(handle: DeploymentHandle, req: ProxiedRequest, metrics: ClusterMetrics,
                sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> Response:
    """Answer ``req`` from a replica chosen by the handle's request router (see the module docstring)."""
    key = route_key(req.body, {k.decode("latin-1"): v.decode("latin-1") for k, v in req.headers})
    streamed = handle.options(stream=True)
    for attempt in range(MAX_ATTEMPTS):
        gen = streamed.handle.remote(req, route=key)
        try:
            head = await _read_head(gen)
        except RETRYABLE as exc:
            gen.cancel()
            metrics.retries.inc()
            logger.warning("replica gone before answering (attempt %d): %s", attempt + 1, exc)
            await sleep(RETRY_BACKOFF_S * (attempt + 1))
            continue
        except (RayTaskError, RuntimeError, StopAsyncIteration) as exc:
            gen.cancel()
            logger.error("replica failed the request: %s", exc)
            return error_response(500, f"the replica failed the request: {type(exc).__name__}",
                                  "replica_error", req.path)
        except BaseException:
            gen.cancel()  # the client went away (cancelled) while the replica worked
            raise
        return RelayResponse(gen, head, req.path, metrics)
    return error_response(503, f"no replica answered after {MAX_ATTEMPTS} attempts; retry later",
                          "replicas_unavailable", req.path)


def stream_error_event(path: str, message: str) -> bytes:
    """The error event that ends a stream cut by a dying replica."""
    if _anthropic(path):
        body = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"event: error\ndata: {json.dumps(body)}\n\n".encode()
    body = {"error": {"message": message, "type": "internal_server_error", "param": None,
                      "code": "replica_died", "status_code": 503}}
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()


class RelayResponse(Response):
    """A response whose status, headers and body come from the replica's streamed call."""

    def __init__(self, gen: DeploymentResponseGenerator, head: _Head, path: str, metrics: ClusterMetrics) -> None:
        super().__init__(status_code=head.start.status)
        self.gen, self.head, self.path, self.cluster_metrics = gen, head, path, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = self.head
        await send({"type": "http.response.start", "status": head.start.status,
                    "headers": list(head.start.headers)})
        try:
            for chunk in head.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not head.done:
                await self._rest(send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.gen.cancel()

    async def _rest(self, send: Send) -> None:
        try:
            async for item in self.gen:
                if isinstance(item, bytes) and item:
                    await send({"type": "http.response.body", "body": item, "more_body": True})
        except REPLICA_GONE as exc:
            self.cluster_metrics.stream_errors.inc()
            logger.warning("replica died mid-response: %s", exc)
            if (self.head.start.header("content-type") or "").startswith("text/event-stream"):
                event = stream_error_event(self.path, "the replica serving this stream died; "
                                           "resend the request")
                await send({"type": "http.response.body", "body": event, "more_body": True})
