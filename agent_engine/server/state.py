"""``ServerState``: what the route handlers of one app share (the engine, metrics, model facts, limits).

Invariants:
- Handlers reach the engine only through this state's ``AsyncEngine`` (``submit``, ``call``), never
  directly; engine failures leave here as ``APIError``s (503 engine unavailable, 400 invalid request).
- ``api_key`` and ``max_waiting`` start from the ``ServerConfig`` and may be changed at runtime
  (tests do); the auth middleware and ``submit`` read them per request.
- ``token_strs`` only grows: a token id's decoded text never changes for one tokenizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from agent_engine.server.async_engine import AsyncEngine, EngineDeadError, EngineStoppedError
from agent_engine.server.errors import APIError, bad_request
from agent_engine.server.groups import RequestGroup, RequestSpec
from agent_engine.server.metrics import ServerMetrics

RETRY_AFTER_S = "1"


@dataclass
class ServerState:
    """Per-app state, kept on ``app.state.server``."""

    engine: AsyncEngine
    metrics: ServerMetrics
    model_name: str
    max_model_len: int
    max_waiting: int | None = None
    api_key: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    token_strs: dict[int, str] = field(default_factory=dict)
    last_stats: dict[str, Any] = field(default_factory=dict)

    def check_model(self, model: str | None) -> None:
        """404 unless ``model`` is unset or the served model's name."""
        if model and model != self.model_name:
            raise APIError(404, f"the model '{model}' does not exist; this server serves '{self.model_name}'",
                           param="model", code="model_not_found")

    async def submit(self, specs: list[RequestSpec]) -> RequestGroup:
        """Queue the requests and wait for the engine to accept them; maps failures to API errors."""
        self._check_admission(len(specs))
        try:
            group = self.engine.submit(specs)
            await group.accepted()
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        except ValueError as exc:
            code = "context_length_exceeded" if "max_model_len" in str(exc) else "invalid_request"
            raise bad_request(str(exc), code=code) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("jinja2"):
                raise bad_request(f"chat template failed: {exc}", param="messages") from exc
            raise
        return group

    async def release_job(self, job_id: str) -> bool:
        """Release the job's pin on the engine (True if it held one) and drop its metric series."""
        try:
            released = await self.engine.release_job(job_id)
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        self.metrics.on_job_released(job_id)
        return released

    async def refresh_stats(self) -> dict[str, Any]:
        """A fresh engine stats snapshot while the engine is healthy, else the last one taken."""
        if self.engine.healthy:
            try:
                self.last_stats = await self.engine.stats()
            except (EngineDeadError, EngineStoppedError):
                pass
        return self.last_stats

    async def fill_token_strs(self, ids: list[int]) -> dict[int, str]:
        """Decoded text of each token id (cached; decoding runs on the engine thread)."""
        missing = sorted({t for t in ids if t not in self.token_strs})
        if missing:
            got = await self.engine.call(lambda e: {t: e.tokenizer.decode([t]) for t in missing})
            self.token_strs.update(got)
        return self.token_strs

    def _check_admission(self, n_new: int) -> None:
        if self.max_waiting is not None and self.engine.num_queued() + n_new > self.max_waiting:
            raise APIError(503, f"too many queued requests (max {self.max_waiting}); retry later",
                           code="server_overloaded", headers={"Retry-After": RETRY_AFTER_S})


def server_state(request: Request) -> ServerState:
    """The ``ServerState`` of the app serving ``request`` (a FastAPI dependency)."""
    return request.app.state.server
