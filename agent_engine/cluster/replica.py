"""One engine replica of the Ray Serve deployment: the single server's app, run in-process.

Each replica builds an ``LLMEngine`` and the very FastAPI app the single server serves
(``server.app.build_app``: every route, hint, error, stream and metric), and runs it through its
lifespan, so the engine thread starts with the replica and drains when Ray stops it. The ingress
sends it HTTP requests as data (``bridge.ProxiedRequest``):

- ``handle(request, route=...)``: streamed, yields the ``ResponseStart`` then body chunks (``route`` is
  for the request router, unused here);
- ``call(request, timeout)``: the whole response with this replica's id, a 504 past ``timeout``
  (``handle.broadcast`` fan-outs: metrics, health, job release);
- ``record_routing_stats()``: what the routers read (Ray polls it every
  ``request_routing_stats_period_s``): the jobs holding a lease here, the jobs with a request here,
  free and total blocks, waiting and running counts, the replica's wall clock and its pid;
- ``check_health()``: raises once the engine thread died, or while its step loop has work and has not
  advanced for the stall timeout (Ray then replaces the replica);
- ``drain(timeout)``: stop intake (new requests get 503), let in-flight requests finish for up to
  ``timeout`` seconds, abort the rest (streams end with ``finish_reason: "abort"`` and ``[DONE]``);
  returns once nothing runs. The cluster's stop calls it on every replica before Ray tears down.

Invariants: the engine is touched only on its own thread (its routing stats and whether it is busy are
typed questions to ``AsyncEngine``, never code run on its thread);
closing a stream (the client went away) disconnects the app's request, which aborts it in the engine.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator

from agent_engine.cluster.bridge import (
    ProxiedRequest,
    ResponseStart,
    collect,
    error_start_and_body,
    stream_asgi,
)
from agent_engine.config import EngineConfig
from agent_engine.engine.engine_stats import RoutingStats
from agent_engine.routing import RouteKey
from agent_engine.server.server_config import ServerConfig

DRAIN_MARGIN_S = 2.0  # past the drain timeout: the aborts' last events reach their streams


def routing_payload(stats: RoutingStats) -> dict[str, object]:
    """``stats`` as the routers read it (``routers``: plain lists and numbers, sent through Ray)."""
    return {"leases": list(stats.leases), "active_jobs": list(stats.active_jobs), "free_blocks": stats.free_blocks,
            "num_blocks": stats.num_blocks, "num_waiting": stats.num_waiting, "num_running": stats.num_running}


class EngineReplica:
    """The deployment class (``app.build_application`` wraps it with ``serve.deployment``)."""

    async def __init__(self, engine_config: EngineConfig, server_config: ServerConfig,
                     threads: int | None = None) -> None:
        from ray import serve

        from agent_engine.engine.factory import run_on_own_thread, serving_config
        from agent_engine.engine.llm_engine import LLMEngine
        from agent_engine.server.app import build_app
        from agent_engine.server.async_engine import AsyncEngine

        if threads:
            import torch

            torch.set_num_threads(threads)
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        self.engine = await asyncio.to_thread(run_on_own_thread, lambda: LLMEngine(serving_config(engine_config)))
        self.async_engine = AsyncEngine.from_config(self.engine, server_config)
        self.app = build_app(self.async_engine, server_config)
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()

    async def handle(self, request: ProxiedRequest, route: RouteKey | None = None
                     ) -> AsyncIterator[ResponseStart | bytes]:
        async for item in stream_asgi(self.app, request):
            yield item

    async def call(self, request: ProxiedRequest,
                   timeout: float | None = None) -> tuple[str, ResponseStart, bytes]:
        try:
            start, body = await asyncio.wait_for(collect(self.app, request), timeout)
        except asyncio.TimeoutError:
            message = f"replica {self.replica_id} did not answer in {timeout} s"
            start, body = error_start_and_body(504, message, "replica_timeout")
        return self.replica_id, start, body

    async def record_routing_stats(self) -> dict[str, object]:
        """The engine's ``RoutingStats`` (none while it is unhealthy) with this replica's clock and names,
        as the plain dict Ray hands the routers."""
        stats = routing_payload(await self.async_engine.routing_stats()) if self.async_engine.healthy else {}
        return {**stats, "at": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
                "replica": self.replica_id}

    async def drain(self, timeout: float) -> bool:
        """Drain the engine (see the module docstring); True once nothing runs or waits."""
        self.async_engine.begin_drain(timeout)
        deadline = time.monotonic() + timeout + DRAIN_MARGIN_S
        while time.monotonic() < deadline and self.async_engine.healthy:
            if not await self.async_engine.has_unfinished_requests():
                return True
            await asyncio.sleep(0.1)
        return not self.async_engine.healthy

    async def check_health(self) -> None:
        problem = self.async_engine.health_problem
        if problem is not None:
            raise RuntimeError(f"engine unhealthy: {problem}")

    async def __del__(self) -> None:
        lifespan = getattr(self, "_lifespan", None)
        if lifespan is not None:
            self._lifespan = None
            await lifespan.__aexit__(None, None, None)
            self.engine.close()
