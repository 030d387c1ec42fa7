"""``agent-engine serve``: the OpenAI-compatible server on uvicorn.

Wiring: ``add_arguments(parser)`` adds every engine flag (generated from ``EngineConfig``, so they
never drift) plus the server flags (``ServerConfig.add_arguments``); ``run_serve(args) -> int`` builds
both configs once from the parsed flags and runs until SIGTERM/SIGINT.
Also runnable as ``python -m agent_engine.server.serve``.

Invariants:
- On SIGTERM the engine stops admitting (503), lets in-flight requests finish for up to
  ``--drain-timeout`` seconds, then aborts them (streams end with ``finish_reason: "abort"`` and
  ``[DONE]``, plain requests with a JSON error), releases every pin, and the process returns 0
  (``server.app.draining_server``).
- Importing this module is light (no torch, fastapi or uvicorn): they load in ``run_serve``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from agent_engine.config import EngineConfig
from agent_engine.routing import ClusterConfig
from agent_engine.server.server_config import ServerConfig

logger = logging.getLogger(__name__)

HELP = "OpenAI-compatible HTTP server"
CLUSTER_MODULE = "agent_engine.cluster.serve_cluster"  # --replicas N > 1: Ray Serve (the optional extra ``ray``)
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the engine flags and the server flags (host, port, API key, admission, shutdown, logging),
    and the cluster flags (``--replicas``, ``--router``, ...)."""
    EngineConfig.add_arguments(parser)
    ServerConfig.add_arguments(parser)
    ClusterConfig.add_arguments(parser)
    parser.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    """Build the engine, serve until SIGTERM/SIGINT, shut down gracefully; returns the exit status.

    With ``--replicas N > 1`` the replicas run on Ray Serve instead (``agent_engine.cluster``, which
    sits above this package: it is loaded by name, like a command module)."""
    if getattr(args, "replicas", 1) > 1:
        return int(importlib.import_module(CLUSTER_MODULE).run_cluster(args))
    from agent_engine.engine.factory import run_on_own_thread, serving_config
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.server.app import build_app, draining_server
    from agent_engine.server.async_engine import AsyncEngine

    server_config = ServerConfig.from_args(args)
    logging.basicConfig(level=server_config.log_level.upper(), format=_LOG_FORMAT)

    engine = run_on_own_thread(lambda: LLMEngine(serving_config(EngineConfig.from_args(args))))
    async_engine = AsyncEngine.from_config(engine, server_config)
    app = build_app(async_engine, server_config)
    server = draining_server(app, async_engine, server_config.host, server_config.port,
                             server_config.log_level, server_config.drain_timeout, server_config.header_timeout)
    # What start-up built (model, tokenizer, app) lives as long as the process: out of the
    # collector's scans, so a full collection while serving walks only serving's own objects.
    gc.collect()
    gc.freeze()
    try:
        with _signals_swallowed():
            logger.info("serving %s on http://%s:%d", engine.model_name, server_config.host,
                        server_config.port)
            server.run()
    finally:
        async_engine.shutdown(drain_timeout=0.0)
        engine.close()
    return 0 if server.started else 1


@contextmanager
def _signals_swallowed() -> Iterator[None]:
    """SIGTERM/SIGINT do nothing outside uvicorn's own handling (restored on exit).

    uvicorn re-raises the signal it handled once it has shut down; ignoring it here turns a drained
    shutdown into exit 0."""

    def ignore(_sig: int, _frame: object) -> None:
        pass

    previous = {s: signal.signal(s, ignore) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-engine serve",
                                     description="OpenAI-compatible HTTP server (completions, chat, metrics)")
    add_arguments(parser)
    return run_serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
