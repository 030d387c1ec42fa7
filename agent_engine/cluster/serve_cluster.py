"""``agent-engine serve --replicas N`` (N > 1): the engine replicas and their ingress on Ray Serve.

Starts (or joins, ``--ray-address``) a Ray cluster, starts Ray Serve's HTTP proxy on ``--host``/
``--port``, deploys ``app.build_application`` and serves until SIGTERM/SIGINT, then shuts Serve down
(replicas drain their engines for ``--drain-timeout`` seconds) and, if it started Ray, Ray.

Invariants:
- The HTTP entry (Ray Serve's proxy) listens on ``--host`` (127.0.0.1 by default) and nowhere else.
  Ray's own services of a local instance (no dashboard) listen on the machine's address, as Ray
  always does, and require Ray's cluster token (on by default).
- Without Ray installed the command fails with a one-line message and exit status 2 (no traceback);
  a deployment that fails to start is a one-line error and exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from agent_engine.config import EngineConfig
from agent_engine.routing import ClusterConfig
from agent_engine.server.server_config import ServerConfig

logger = logging.getLogger(__name__)

APP_NAME = "agent-engine"
# Defaults for a local instance (the caller's environment wins): no usage reporting, and Ray Serve's
# proxy may take up to 30 s to come up and to answer a health check (a loaded 2-core machine needs it).
RAY_ENV_DEFAULTS = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "30",
    "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "30",
}
RAY_HINT = "pip install 'agent-engine[ray]' (Ray Serve)"
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def ray_available() -> bool:
    """Whether Ray Serve can be imported here."""
    try:
        import ray.serve  # noqa: F401
    except ImportError:
        return False
    return True


def run_cluster(args: argparse.Namespace) -> int:
    """Serve N replicas until SIGTERM/SIGINT; returns the exit status (see the module docstring)."""
    if not ray_available():
        print(f"agent-engine serve: --replicas {args.replicas} needs Ray Serve: {RAY_HINT}", file=sys.stderr)
        return 2
    server_config = ServerConfig.from_args(args)
    cluster = ClusterConfig.from_args(args)
    engine_config = EngineConfig.from_args(args)
    logging.basicConfig(level=server_config.log_level.upper(), format=_LOG_FORMAT)
    with _ray(cluster, server_config.log_level) as ray_ok:
        if not ray_ok:
            return 1
        return _serve_until_signal(engine_config, server_config, cluster)


@contextmanager
def _ray(cluster: ClusterConfig, log_level: str) -> Iterator[bool]:
    """Ray started (a local instance) or joined for the block; a local instance is shut down after it."""
    import ray

    for key, value in RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    quiet = log_level not in ("info", "debug")
    try:
        if cluster.ray_address:
            ray.init(address=cluster.ray_address, log_to_driver=not quiet)
        else:
            ray.init(address="local", include_dashboard=False, num_cpus=max(2, os.cpu_count() or 2),
                     log_to_driver=not quiet)
    except Exception as exc:  # a bad address, a port in use: one line, not a traceback
        print(f"agent-engine serve: cannot start or join Ray: {exc}", file=sys.stderr)
        yield False
        return
    try:
        yield True
    finally:
        if not cluster.ray_address:
            ray.shutdown()


def _serve_until_signal(engine_config: EngineConfig, server_config: ServerConfig,
                        cluster: ClusterConfig) -> int:
    from ray import serve

    from agent_engine.cluster.ray_app import build_application, local_replica_threads

    stop = threading.Event()
    threads = None if cluster.ray_address else local_replica_threads(cluster)
    try:
        serve.start(http_options={"host": server_config.host, "port": server_config.port})
        app = build_application(engine_config, server_config, cluster, threads)
        serve.run(app, name=APP_NAME, route_prefix="/")
    except Exception as exc:
        print(f"agent-engine serve: the deployment failed to start: {exc}", file=sys.stderr)
        with suppress(Exception):
            serve.shutdown()
        return 1
    logger.info("serving %d replicas (router %s) on http://%s:%d", cluster.replicas, cluster.router,
                server_config.host, server_config.port)
    with _stop_on_signals(stop):
        while not stop.wait(0.5):
            pass
    logger.info("shutting down: replicas drain for up to %.0f s", server_config.drain_timeout)
    with suppress(Exception):
        serve.shutdown()
    return 0


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def handler(_sig: int, _frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
