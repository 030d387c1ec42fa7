"""``ServerConfig``: the start-up options of one server (listen address, auth, admission, shutdown, logs).

Invariants:
- Built once, from the command line (``ServerConfig.from_args`` in ``serve``) or directly (tests,
  embedders), and never changed afterwards (frozen); ``build_app`` and ``serve`` read it, nothing else.
- ``add_arguments`` is the one definition of the server flags; their defaults are the field defaults.
- Standard library only, so ``agent-engine serve --help`` stays light.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


@dataclass(frozen=True)
class ServerConfig:
    """Where to listen, who may call ``/v1/*``, when to shed load, how long to drain, how much to log.

    ``api_key`` None (or empty) leaves ``/v1/*`` open; ``max_waiting`` None admits without bound;
    ``drain_timeout`` is how long in-flight requests may run after SIGTERM before they are aborted.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_waiting: int | None = None
    drain_timeout: float = 10.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add the "server options" group (host, port, API key, admission, shutdown, logging)."""
        d = ServerConfig()
        g = parser.add_argument_group("server options")
        g.add_argument("--host", default=d.host, help=f"address to listen on (default: {d.host})")
        g.add_argument("--port", type=int, default=d.port, help=f"TCP port to listen on (default: {d.port})")
        g.add_argument("--api-key", default=d.api_key,
                       help="require 'Authorization: Bearer KEY' on /v1/* (default: no authentication)")
        g.add_argument("--max-waiting", type=int, default=d.max_waiting,
                       help="answer 503 + Retry-After when more than N requests are queued "
                            "(default: unbounded)")
        g.add_argument("--drain-timeout", type=float, default=d.drain_timeout,
                       help="seconds in-flight requests may run after SIGTERM before they are aborted "
                            f"(default: {d.drain_timeout:g})")
        g.add_argument("--log-level", default=d.log_level, choices=list(LOG_LEVELS),
                       help=f"log level of the server and uvicorn (default: {d.log_level})")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServerConfig:
        """The config of parsed ``add_arguments`` flags."""
        return cls(host=args.host, port=args.port, api_key=args.api_key, max_waiting=args.max_waiting,
                   drain_timeout=args.drain_timeout, log_level=args.log_level)
