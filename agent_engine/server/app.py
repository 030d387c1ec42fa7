"""The app factory: ``build_app(async_engine, server_config) -> FastAPI``, plus the API-key middleware.

Invariants:
- Route handlers (``routes``) run on the event loop and never touch the engine: they submit
  ``RequestSpec``s to the ``AsyncEngine`` and read events from its asyncio queues; stats come from
  engine-thread snapshots.
- The engine thread runs exactly while the app does: started on app start-up; on shutdown intake stops,
  in-flight requests get ``drain_timeout`` seconds, the rest are aborted and the thread is joined.
- Every request that a handler submitted ends on the engine side: finished, or aborted when the client
  disconnects (streamed: Starlette cancels the generator; non-streamed: a disconnect watcher), when
  the handler fails, or at shutdown.
- With an API key set, every ``/v1/*`` request without ``Authorization: Bearer KEY`` or ``x-api-key: KEY``
  (Anthropic's header) is a 401 before any handler runs; ``/health`` and ``/metrics`` stay open.
- Errors are OpenAI-style bodies, Anthropic-style on ``/v1/messages*`` (see ``errors``); failed engine
  steps map to 500 / an error event.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from agent_engine.server.anthropic.routes import router as anthropic_router
from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.config import ServerConfig
from agent_engine.server.errors import APIError, error_body_for, install_error_handlers
from agent_engine.server.metrics import ServerMetrics
from agent_engine.server.routes import router
from agent_engine.server.state import ServerState

_SHUTDOWN_POLL_S = 0.02


def build_app(async_engine: AsyncEngine, server_config: ServerConfig | None = None) -> FastAPI:
    """An app serving ``async_engine`` (started on app start-up, shut down on app shutdown).

    ``server_config`` supplies the API key, the admission limit and the drain timeout (default:
    ``ServerConfig()``); its host, port and log level are for whoever runs the app (``serve``)."""
    config = server_config if server_config is not None else ServerConfig()
    metrics = _attach_metrics(async_engine)
    eng = async_engine.engine
    state = ServerState(async_engine, metrics, str(eng.model_name), int(eng.max_model_len),
                        max_waiting=config.max_waiting, api_key=config.api_key or None)
    app = FastAPI(title="agent-engine", lifespan=_lifespan(async_engine, config.drain_timeout))
    app.state.server = state
    install_error_handlers(app)
    app.add_middleware(ApiKeyMiddleware, state=state)
    app.include_router(router)
    app.include_router(anthropic_router)
    return app


def _attach_metrics(async_engine: AsyncEngine) -> ServerMetrics:
    """New app metrics, fed by the engine thread's output, abort and job listeners."""
    metrics = ServerMetrics()
    async_engine.output_listeners.append(metrics.on_output)
    async_engine.abort_listeners.append(metrics.on_abort)
    job_hooks = getattr(async_engine.engine, "job_hooks", None)
    if job_hooks is not None:
        job_hooks.job_listeners.append(metrics.on_job_finished)
    return metrics


def _lifespan(async_engine: AsyncEngine,
              drain_timeout: float) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async_engine.start()
        yield
        await _shutdown(async_engine, drain_timeout)

    return lifespan


async def _shutdown(async_engine: AsyncEngine, drain_timeout: float) -> None:
    """Drain and stop the engine without blocking the event loop (streams keep flowing meanwhile)."""
    # A plain thread, not the default executor (which refuses work during interpreter shutdown).
    stopper = threading.Thread(target=async_engine.shutdown, args=(drain_timeout,), daemon=True)
    stopper.start()
    while stopper.is_alive():
        await asyncio.sleep(_SHUTDOWN_POLL_S)


class ApiKeyMiddleware:
    """Pure-ASGI API-key check for ``/v1/*`` against ``state.api_key`` (read per request, None = open):
    ``Authorization: Bearer KEY`` (OpenAI, Claude Code) or ``x-api-key: KEY`` (Anthropic SDK) passes.

    It does not wrap ``receive``, so client disconnects still reach the handlers."""

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        key = self.state.api_key
        path = scope.get("path", "")
        if key and scope["type"] == "http" and path.startswith("/v1"):
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {key}".encode() and \
                    headers.get(b"x-api-key") != key.encode():
                err = APIError(401, "invalid or missing API key (send 'Authorization: Bearer KEY' or "
                               "'x-api-key: KEY')", code="invalid_api_key")
                await JSONResponse(error_body_for(err, path), status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)
