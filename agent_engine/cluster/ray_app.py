"""The Ray Serve application: ``replicas`` engine replicas behind one ingress, routed by the chosen router.

``build_application(engine_config, server_config, cluster_config)`` is what ``agent-engine serve
--replicas N`` runs; ``app_builder(args)`` is the same application for Ray's own tools, taking the
``serve`` flags as a dict (names with ``-`` or ``_``; ``true``/``false`` for on/off flags)::

    serve run agent_engine.cluster.ray_app:app_builder replicas=2 policy=continuum num-kv-blocks=512
    serve deploy agent_engine/cluster/serve_config.yaml

Invariants:
- The engine deployment is named ``ENGINE_DEPLOYMENT``; its request router is
  ``routers.ROUTER_CLASSES[router]``; replicas report routing stats every ``stats_period_s``.
- Deployments ask Ray for no CPUs (``num_cpus: 0``: the engines size their own threads, and a
  2-core machine can still hold N replicas); a real cluster sets ``ray_actor_options`` (GPUs) in
  the application config.
- A bad flag in ``args`` is a ``ValueError`` naming it, never a ``SystemExit``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from agent_engine.cluster.ingress import Ingress
from agent_engine.cluster.replica import EngineReplica
from agent_engine.cluster.routers import ROUTER_CLASSES
from agent_engine.config import EngineConfig
from agent_engine.json_types import JsonValue
from agent_engine.routing import ClusterConfig
from agent_engine.server.server_config import ServerConfig

if TYPE_CHECKING:
    from ray.serve import Application

__all__ = ["ENGINE_DEPLOYMENT", "INGRESS_DEPLOYMENT", "app_builder", "build_application",
           "local_replica_threads", "parse_flags"]

ENGINE_DEPLOYMENT = "EngineReplica"
INGRESS_DEPLOYMENT = "Ingress"
HEALTH_CHECK_PERIOD_S = 2.0
HEALTH_CHECK_TIMEOUT_S = 30.0


def local_replica_threads(cluster: ClusterConfig) -> int:
    """Torch threads per replica when every replica runs on this machine: the flag, else this machine's
    cores shared evenly (at least 1)."""
    return cluster.replica_threads or max(1, (os.cpu_count() or 1) // cluster.replicas)


def build_application(engine_config: EngineConfig, server_config: ServerConfig, cluster: ClusterConfig,
                      threads: int | None = None) -> Application:
    """The bound Ray Serve application (ingress -> engine replicas); ``threads``: torch threads per
    replica (None: ``cluster.replica_threads``, else torch's default on the replica's node)."""
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    kwargs = {"max_imbalance": cluster.max_imbalance} if cluster.router == "affinity" else {}
    router_config = RequestRouterConfig(
        request_router_class=ROUTER_CLASSES[cluster.router], request_router_kwargs=kwargs,
        request_routing_stats_period_s=cluster.stats_period_s,
        request_routing_stats_timeout_s=max(5.0, 5 * cluster.stats_period_s))
    engine = serve.deployment(EngineReplica, name=ENGINE_DEPLOYMENT).options(
        num_replicas=cluster.replicas, max_ongoing_requests=cluster.max_ongoing_requests,
        request_router_config=router_config, ray_actor_options={"num_cpus": 0},
        health_check_period_s=HEALTH_CHECK_PERIOD_S, health_check_timeout_s=HEALTH_CHECK_TIMEOUT_S,
        graceful_shutdown_timeout_s=server_config.drain_timeout + 5.0)
    ingress = serve.deployment(Ingress, name=INGRESS_DEPLOYMENT).options(
        num_replicas=1, max_ongoing_requests=100_000, ray_actor_options={"num_cpus": 0})
    engines = engine.bind(engine_config, server_config, threads or cluster.replica_threads)
    return ingress.bind(engines, ENGINE_DEPLOYMENT)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def parse_flags(argv: list[str]) -> tuple[EngineConfig, ServerConfig, ClusterConfig]:
    """The three configs of ``serve``-style flags (``ValueError`` on a bad one)."""
    parser = _Parser(prog="agent-engine cluster", add_help=False)
    EngineConfig.add_arguments(parser)
    ServerConfig.add_arguments(parser)
    ClusterConfig.add_arguments(parser)
    ns = parser.parse_args(argv)
    return EngineConfig.from_args(ns), ServerConfig.from_args(ns), ClusterConfig.from_args(ns)


def args_to_flags(args: Mapping[str, JsonValue]) -> list[str]:
    """``{"num_kv_blocks": 64, "soft_pins": False}`` -> ``["--num-kv-blocks", "64", "--no-soft-pins"]``."""
    argv: list[str] = []
    for key, value in args.items():
        flag = "--" + str(key).replace("_", "-")
        text = str(value).lower() if isinstance(value, bool | str) else None
        if text in ("true", "false"):
            argv.append(flag if text == "true" else "--no-" + flag[2:])
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def app_builder(args: Mapping[str, JsonValue]) -> Application:
    """Ray Serve application builder (``serve run`` / ``serve deploy``): ``args`` are the serve flags."""
    engine_config, server_config, cluster = parse_flags(args_to_flags(args or {}))
    return build_application(engine_config, server_config, cluster)
