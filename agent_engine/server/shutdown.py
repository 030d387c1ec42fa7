"""Graceful shutdown: SIGTERM starts the engine's drain at once, and uvicorn waits for it to end.

uvicorn alone would, on SIGTERM, wait ``timeout_graceful_shutdown`` for connections and then cancel
them, and only after that run the app's shutdown (where the engine drains): long streams would be cut
without a ``finish_reason`` or ``[DONE]`` and plain requests would get a bare 500. ``DrainingServer``
reverses the order: its exit handler first tells the ``AsyncEngine`` to drain (no new requests: 503;
running ones may finish for ``drain_timeout`` seconds; then each is aborted, so every open stream ends
with ``finish_reason: "abort"`` and ``[DONE]`` and every plain request with a JSON error), and
uvicorn's own graceful period is longer than the drain by ``GRACE_MARGIN_S``, so it only ever closes
connections whose responses are complete.

Invariant: ``begin_drain`` is non-blocking and idempotent, so calling it from the signal handler is safe.
"""

from __future__ import annotations

import math
from typing import Any

import uvicorn

from agent_engine.server.async_engine import AsyncEngine

GRACE_MARGIN_S = 5.0


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM/SIGINT first starts the engine's drain."""

    def __init__(self, config: uvicorn.Config, async_engine: AsyncEngine, drain_timeout: float) -> None:
        super().__init__(config)
        self.async_engine = async_engine
        self.drain_timeout = drain_timeout

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.async_engine.begin_drain(self.drain_timeout)
        super().handle_exit(sig, frame)


def draining_server(app: Any, async_engine: AsyncEngine, host: str, port: int, log_level: str,
                    drain_timeout: float) -> DrainingServer:
    """A ``DrainingServer`` for ``app`` whose graceful period covers the drain plus a margin."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=math.ceil(drain_timeout + GRACE_MARGIN_S))
    return DrainingServer(config, async_engine, drain_timeout)
