"""The app factory, ``build_app(async_engine, server_config) -> FastAPI``, and its lifecycle.

Invariants:
- Route handlers (``routes``) run on the event loop and never touch the engine: they submit
  ``RequestSpec``s to the ``AsyncEngine`` and read events from its asyncio queues; stats come from
  engine-thread snapshots.
- The engine thread runs exactly while the app does: started on app start-up; on shutdown intake stops,
  in-flight requests get ``drain_timeout`` seconds, the rest are aborted and the thread is joined.
- Every request that a handler submitted ends on the engine side: finished, or aborted when the client
  disconnects (streamed: Starlette cancels the generator; non-streamed: a disconnect watcher), when
  the handler fails, or at shutdown.
- With API keys set, every ``/v1/*`` request (and ``/metrics`` and the docs, unless ``open_metrics``)
  without a known key is a 401 before any handler runs; each key is a tenant (``auth``). Bodies over
  ``max_body_bytes`` are a 413 before anything parses them (``limits``); ``/health`` stays open.
- Graceful shutdown (``draining_server``): SIGTERM starts the engine's drain at once, and uvicorn waits
  for it. uvicorn alone would, on SIGTERM, wait ``timeout_graceful_shutdown`` for connections, cancel
  them and only then run the app's shutdown (where the engine drains): long streams would be cut
  without a ``finish_reason`` or ``[DONE]`` and plain requests would get a bare 500.
  ``DrainingServer`` reverses the order: its exit handler first tells the ``AsyncEngine`` to drain
  (``begin_drain``: non-blocking and idempotent, so safe from the signal handler), and uvicorn's own
  graceful period is longer than the drain by ``GRACE_MARGIN_S``, so it only ever closes connections
  whose responses are complete.
- Errors are OpenAI-style bodies, Anthropic-style on ``/v1/messages*`` (see ``errors``); failed engine
  steps map to 500 / an error event.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import uvicorn
from fastapi import FastAPI

from agent_engine.server.anthropic.routes import router as anthropic_router
from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.auth import AuthMiddleware, Tenants
from agent_engine.server.edge_middleware import (
    BodyLimitMiddleware,
    ByteBuckets,
    JsonContentTypeMiddleware,
    header_deadline_protocol,
)
from agent_engine.server.errors import install_error_handlers
from agent_engine.server.metrics import HttpCounterMiddleware, ServerMetrics
from agent_engine.server.open_jobs import OpenJobs
from agent_engine.server.openai_routes import router
from agent_engine.server.server_config import ServerConfig
from agent_engine.server.state import ServerState

_SHUTDOWN_POLL_S = 0.02
GRACE_MARGIN_S = 5.0
MIB = 1024 * 1024


def build_app(async_engine: AsyncEngine, server_config: ServerConfig | None = None) -> FastAPI:
    """An app serving ``async_engine`` (started on app start-up, shut down on app shutdown).

    ``server_config`` supplies the API key, the admission limit and the drain timeout (default:
    ``ServerConfig()``); its host, port and log level are for whoever runs the app (``serve``)."""
    config = server_config if server_config is not None else ServerConfig()
    metrics = _attach_metrics(async_engine)
    eng = async_engine.engine
    tenants = Tenants.from_keys(config.api_keys, config.admin_keys, dict(config.key_tenants))
    state = ServerState(async_engine, metrics, str(eng.model_name), int(eng.max_model_len),
                        max_waiting=config.max_waiting, tenant_max_requests=_tenant_cap(config, tenants, eng),
                        open_jobs=OpenJobs(_open_job_cap(config, tenants, eng)),
                        max_prompts=config.max_prompts, tenants=tenants,
                        open_metrics=config.open_metrics, max_body_bytes=config.max_body_bytes,
                        body_timeout=config.body_timeout)
    async_engine.share_prefix_cache = config.share_prefix_cache
    async_engine.max_request_tokens = config.max_request_tokens or 8 * int(eng.max_model_len)
    app = FastAPI(title="agent-engine", lifespan=_lifespan(async_engine, config.drain_timeout))
    app.state.server = state
    app.state.server_config = config
    install_error_handlers(app)
    if tenants.multi:
        state.body_buckets = ByteBuckets(config.tenant_body_rate * MIB, config.max_body_bytes)
    # Outermost last: count every request, check the key, refuse oversized or too frequent bodies, then
    # check the body type.
    app.add_middleware(JsonContentTypeMiddleware)
    app.add_middleware(BodyLimitMiddleware, state=state)
    app.add_middleware(AuthMiddleware, state=state)
    app.add_middleware(HttpCounterMiddleware, metrics=metrics)
    app.include_router(router)
    app.include_router(anthropic_router)
    return app


def _tenant_cap(config: ServerConfig, tenants: Tenants, engine: Any) -> int | None:
    """The per-tenant in-flight cap: as configured, else half the running seats when keys make tenants."""
    if config.tenant_max_requests is not None or not tenants.multi:
        return config.tenant_max_requests
    seats = getattr(getattr(engine, "config", None), "max_num_seqs", None)
    return max(1, int(seats) // 2) if seats else None


def _open_job_cap(config: ServerConfig, tenants: Tenants, engine: Any) -> int | None:
    """The per-tenant bound on open jobs: as configured, else the running seats when keys make tenants."""
    if config.tenant_max_open_jobs is not None or not tenants.multi:
        return config.tenant_max_open_jobs
    seats = getattr(getattr(engine, "config", None), "max_num_seqs", None)
    return max(1, int(seats)) if seats else None


def _attach_metrics(async_engine: AsyncEngine) -> ServerMetrics:
    """New app metrics, fed by the engine thread's output, abort and job listeners."""
    metrics = ServerMetrics()
    async_engine.output_listeners.append(metrics.on_output)
    async_engine.abort_listeners.append(metrics.on_abort)
    async_engine.engine.listen_to_jobs(metrics.job_ends)
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


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM/SIGINT first starts the engine's drain."""

    def __init__(self, config: uvicorn.Config, async_engine: AsyncEngine, drain_timeout: float) -> None:
        super().__init__(config)
        self.async_engine = async_engine
        self.drain_timeout = drain_timeout

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.async_engine.begin_drain(self.drain_timeout)
        super().handle_exit(sig, frame)


def draining_server(app: FastAPI, async_engine: AsyncEngine, host: str, port: int, log_level: str,
                    drain_timeout: float, header_timeout: float = 10.0) -> DrainingServer:
    """A ``DrainingServer`` for ``app`` whose graceful period covers the drain plus a margin, and whose
    connections close when request headers take longer than ``header_timeout`` seconds."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=math.ceil(drain_timeout + GRACE_MARGIN_S),
                            http=header_deadline_protocol(header_timeout))
    return DrainingServer(config, async_engine, drain_timeout)
