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
- A signal to the whole process group (systemd's default stop, a container's init, Ctrl-C in a shell)
  drains like one to the leader: the command runs as a small supervisor that starts the Ray driver
  (and so Ray's own processes) in a session of its own, forwards SIGTERM/SIGINT to it once, and exits
  with its status. Without this, Ray's processes would die of the group's signal mid-drain. The driver
  dies with the supervisor (``PR_SET_PDEATHSIG``), so it is never left behind.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from agent_engine.config import EngineConfig
from agent_engine.routing import ClusterConfig
from agent_engine.server.server_config import ServerConfig

logger = logging.getLogger(__name__)

APP_NAME = "agent-engine"
DRIVER_ENV = "AGENT_ENGINE_CLUSTER_DRIVER"  # set in the driver the supervisor starts
_PR_SET_PDEATHSIG = 1
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
    if os.environ.get(DRIVER_ENV) != "1":
        return _supervise([sys.executable, *sys.orig_argv[1:]])
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
    _drain_replicas(server_config.drain_timeout)
    with suppress(Exception):
        serve.shutdown()
    return 0


def _drain_replicas(timeout: float) -> None:
    """Every replica stops intake and ends its requests (finished, or aborted at ``timeout``) while the
    proxy still carries their last events; only then does Serve tear the application down."""
    from ray import serve

    try:
        drained = serve.get_app_handle(APP_NAME).drain.remote(timeout).result(timeout_s=timeout + 15.0)
        logger.info("drained %d replicas", drained)
    except Exception as exc:  # noqa: BLE001 - Serve's own shutdown still drains what it can
        logger.warning("drain before shutdown failed: %s", exc)
    time.sleep(0.5)  # the proxy flushes the streams' final chunks


def _supervise(command: list[str]) -> int:
    """Run ``command`` (this same ``serve``) as the driver in its own session; forward SIGTERM/SIGINT to
    it once; its exit status."""
    driver = subprocess.Popen(command, env={**os.environ, DRIVER_ENV: "1"}, start_new_session=True,
                              preexec_fn=_die_with_parent)
    forwarded = threading.Event()

    def forward(_sig: int, _frame: object) -> None:
        if not forwarded.is_set():
            forwarded.set()
            with suppress(ProcessLookupError):
                driver.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return driver.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _die_with_parent() -> None:
    """In the driver, before exec (Linux): SIGTERM when the supervisor dies."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


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
