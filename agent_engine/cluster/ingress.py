"""The ingress deployment: one OpenAI- and Anthropic-compatible HTTP entry in front of every engine replica.

Requests are answered by the engine replicas (each runs the single server's app), so every route,
hint, error body and stream is the single server's. The ingress itself answers four things that
concern all replicas, by ``handle.broadcast`` to every live replica:

- ``GET /metrics``: every replica's metrics, each sample labelled ``replica``, plus the router's
  counters and the ingress's retries (``cluster.metrics``);
- ``GET /health``: 200 while at least one replica is healthy (``{"status": "ok", "replicas": k,
  "of": n}``), else 503 with an error body;
- ``DELETE /v1/jobs/{job_id}``: released on every replica (a job may hold a lease on a replica it
  left); ``released_pin`` is true if any held one; the router forgets the job;
- ``GET /cluster/replicas``: the router's view (per replica: queue, leases, free blocks, pid) and
  counters, for operators and tests.

Everything else goes to one replica chosen by the deployment's request router (``relay``).

Invariants: every fan-out has a deadline (``FANOUT_TIMEOUT_S``; each replica answers within
``REPLICA_TIMEOUT_S`` or sends its own 504); a replica that fails is left out of the answer, never
waited on further; the ingress holds no engine state.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent_engine.cluster.bridge import ProxiedRequest, ResponseStart
from agent_engine.cluster.cluster_metrics import ClusterMetrics
from agent_engine.cluster.registry import routers_of
from agent_engine.cluster.relay import RETRYABLE, error_response, relay

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

logger = logging.getLogger(__name__)

FANOUT_TIMEOUT_S = 10.0
REPLICA_TIMEOUT_S = 8.0  # a replica answers a fan-out within this (else its own 504), inside the deadline
PROMETHEUS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOBS_PREFIX = "/v1/jobs/"


async def proxied(request: Request) -> ProxiedRequest:
    """The client's request as data (the whole body read)."""
    client = request.client
    return ProxiedRequest(
        method=request.method, path=request.url.path, query_string=request.url.query.encode("latin-1"),
        headers=tuple((k.lower(), v) for k, v in request.headers.raw), body=await request.body(),
        client=(client.host, client.port) if client else ("127.0.0.1", 0))


class Ingress:
    """The deployment class (``app.build_application`` wraps it with ``serve.deployment``)."""

    def __init__(self, engine: DeploymentHandle, engine_name: str) -> None:
        self.engine = engine
        self.engine_name = engine_name
        self.metrics = ClusterMetrics(self._router_counters)

    async def __call__(self, request: Request) -> Response:
        req = await proxied(request)
        method, path = req.method.upper(), req.path
        if method == "GET" and path == "/metrics":
            return await self._metrics()
        if method == "GET" and path == "/health":
            return await self._health()
        if method == "GET" and path == "/cluster/replicas":
            return JSONResponse(self.router_view())
        if method == "DELETE" and path.startswith(JOBS_PREFIX) and len(path) > len(JOBS_PREFIX):
            return await self._release(req, path[len(JOBS_PREFIX):])
        return await relay(self.engine, req, self.metrics)

    async def drain(self, timeout: float) -> int:
        """Drain every live replica (``EngineReplica.drain``); how many reported nothing left running.
        Called by the cluster's stop through the application handle, never over HTTP."""
        try:
            response = self.engine.broadcast("drain", timeout)
            results = await response.results_async(timeout_s=timeout + 10.0, return_exceptions=True)
        except Exception as exc:  # noqa: BLE001 - a stop goes on whatever a replica did
            logger.warning("drain broadcast failed: %s", exc)
            return 0
        return sum(1 for r in results if r is True)

    def router_view(self) -> dict[str, list[dict[str, object]]]:
        """Every router of the engine deployment in this process: counters and per-replica view."""
        return {"routers": [r.view() for r in routers_of(self.engine_name)]}

    def _router_counters(self) -> tuple[dict[str, int], int]:
        counters: dict[str, int] = {}
        replicas = 0
        for r in routers_of(self.engine_name):
            for k, v in r.counters.as_dict().items():
                counters[k] = counters.get(k, 0) + v
            replicas = max(replicas, len(r.curr_replicas))
        return counters, replicas

    async def _broadcast(self, req: ProxiedRequest) -> list[tuple[str, ResponseStart, bytes]]:
        """``call(req)`` on every live replica; the answers that came back in time."""
        try:
            response = self.engine.broadcast("call", req, REPLICA_TIMEOUT_S)
            results = await asyncio.wait_for(response.results_async(
                timeout_s=FANOUT_TIMEOUT_S, return_exceptions=True), FANOUT_TIMEOUT_S + 1.0)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            logger.warning("broadcast %s %s timed out: %s", req.method, req.path, exc)
            return []
        except RETRYABLE as exc:  # no replica is up (yet), or Ray lost one mid-call
            logger.warning("broadcast %s %s found no replica: %s", req.method, req.path, exc)
            return []
        good = [r for r in results if isinstance(r, tuple)]
        for r in results:
            if not isinstance(r, tuple):
                logger.warning("a replica failed %s %s: %s", req.method, req.path, r)
        return good

    async def _metrics(self) -> Response:
        answers = await self._broadcast(ProxiedRequest("GET", "/metrics"))
        texts = {rid: body.decode() for rid, start, body in answers if start.status == 200}
        missing = max(0, self._router_counters()[1] - len(texts))
        if missing:
            self.metrics.scrape_failures.inc(missing)
        return Response(self.metrics.render(texts), media_type=PROMETHEUS_MEDIA_TYPE)

    async def _health(self) -> Response:
        answers = await self._broadcast(ProxiedRequest("GET", "/health"))
        ok = sum(1 for _, start, _ in answers if start.status == 200)
        if ok:
            return JSONResponse({"status": "ok", "replicas": ok, "of": len(answers)})
        return error_response(503, f"unhealthy: {len(answers)} replicas answered, none healthy", "unhealthy")

    async def _release(self, req: ProxiedRequest, job_id: str) -> Response:
        answers = await self._broadcast(req)
        ok = [json.loads(body) for _, start, body in answers if start.status == 200]
        if not ok:
            if answers:  # every replica refused it the same way (e.g. 401): pass that answer on
                _, start, body = answers[0]
                return Response(body, status_code=start.status, media_type="application/json")
            return error_response(503, "no replica answered; retry later", "replicas_unavailable")
        for r in routers_of(self.engine_name):
            r.forget_job(job_id)
        return JSONResponse({"id": ok[0].get("id", job_id), "object": "job", "deleted": True,
                             "released_pin": any(bool(o.get("released_pin")) for o in ok)})
