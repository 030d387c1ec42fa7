"""``agent-engine serve``: the OpenAI-compatible server on uvicorn.

Wiring: ``add_arguments(parser)`` adds every engine flag (generated from ``EngineConfig``, so they
never drift) plus the server flags; ``run_serve(args) -> int`` runs until SIGTERM/SIGINT.
Also runnable as ``python -m agent_engine.server.serve``.

Invariant: on SIGTERM the server stops accepting connections, lets in-flight requests finish for up to
``--drain-timeout`` seconds (then aborts them), shuts the engine loop down and returns 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

from agent_engine.config import EngineConfig

logger = logging.getLogger(__name__)


HELP = "OpenAI-compatible HTTP server"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the engine flags and the server flags (host, port, API key, admission, shutdown, logging)."""
    EngineConfig.add_arguments(parser)
    g = parser.add_argument_group("server options")
    g.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    g.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default: 8000)")
    g.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: no authentication)")
    g.add_argument("--max-waiting", type=int, default=None,
                   help="answer 503 + Retry-After when more than N requests are queued (default: unbounded)")
    g.add_argument("--drain-timeout", type=float, default=10.0,
                   help="seconds in-flight requests may run after SIGTERM before they are aborted (default: 10)")
    g.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="log level of the server and uvicorn (default: info)")
    parser.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    """Build the engine, serve until SIGTERM/SIGINT, shut down gracefully; returns the exit status."""
    import uvicorn

    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.server.app import build_app
    from agent_engine.server.async_engine import AsyncEngine

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    engine = LLMEngine(EngineConfig.from_args(args))
    async_engine = AsyncEngine(engine)
    app = build_app(async_engine, api_key=args.api_key, max_waiting=args.max_waiting,
                    drain_timeout=args.drain_timeout)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=max(1, int(args.drain_timeout)), access_log=False)
    server = uvicorn.Server(config)
    received: list[int] = []

    def note(sig: int, _frame: object) -> None:
        # uvicorn re-raises the signal it handled once it has shut down; we turn that into exit 0.
        received.append(sig)

    previous = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        logger.info("serving %s on http://%s:%d", engine.model_name, args.host, args.port)
        server.run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        async_engine.shutdown(drain_timeout=0.0)
        engine.close()
    if not server.started:
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-engine serve",
                                     description="OpenAI-compatible HTTP server (completions, chat, metrics)")
    add_arguments(parser)
    return run_serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
