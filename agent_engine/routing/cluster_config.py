"""``ClusterConfig``: how many engine replicas to run and how to route between them (the cluster flags).

Invariants:
- Built once from the command line (``ClusterConfig.from_args``) or directly, never changed (frozen);
  ``add_arguments`` is the one definition of the cluster flags, their defaults are the field defaults.
- Standard library only (no Ray): ``agent-engine serve --help`` and a single-replica server never load
  Ray; ``replicas == 1`` means today's single-process server and every other field is unused.
- Bad values are ``ValueError``s naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from agent_engine.routing.policies import DEFAULT_MAX_IMBALANCE, ROUTERS


def _at_least(low: float, kind: Callable[[str], float] = int) -> Callable[[str], float]:
    """An argparse type: a number (``kind``) >= ``low``, else a clean argparse error."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low:g}, not {text}")
        return value

    return parse


@dataclass(frozen=True)
class ClusterConfig:
    """``replicas`` engines behind one ingress (Ray Serve), requests routed by ``router``.

    ``max_imbalance``: the affinity router keeps a job on its home replica unless that replica's queue
    exceeds the least loaded one's by more than this many requests. ``ray_address`` None starts a
    local Ray instance on 127.0.0.1; ``"auto"`` or an address joins a running cluster.
    ``stats_period_s``: how often each replica reports its leases and free blocks to the routers.
    ``replica_threads``: torch threads per replica (None: the machine's cores shared evenly).
    ``max_ongoing_requests``: requests one replica may hold (the engine queues past its batch)."""

    replicas: int = 1
    router: str = "affinity"
    max_imbalance: int = DEFAULT_MAX_IMBALANCE
    ray_address: str | None = None
    stats_period_s: float = 1.0
    replica_threads: int | None = None
    max_ongoing_requests: int = 1024

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"--replicas must be >= 1, not {self.replicas}")
        if self.router not in ROUTERS:
            raise ValueError(f"--router must be one of {', '.join(ROUTERS)}, not {self.router!r}")
        if self.max_imbalance < 0:
            raise ValueError(f"--max-imbalance must be >= 0, not {self.max_imbalance}")
        if not self.stats_period_s > 0:
            raise ValueError(f"--routing-stats-period must be > 0, not {self.stats_period_s}")
        if self.replica_threads is not None and self.replica_threads < 1:
            raise ValueError(f"--replica-threads must be >= 1, not {self.replica_threads}")
        if self.max_ongoing_requests < 1:
            raise ValueError(f"max_ongoing_requests must be >= 1, not {self.max_ongoing_requests}")

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add the "cluster options" group (replicas, router, load bound, Ray address, stats period)."""
        d = ClusterConfig()
        g = parser.add_argument_group("cluster options (N > 1 replicas run on Ray Serve: pip install "
                                      "'agent-engine[ray]')")
        g.add_argument("--replicas", type=_at_least(1), default=d.replicas, metavar="N",
                       help=f"engine replicas behind one ingress (default: {d.replicas}: a single process)")
        g.add_argument("--router", default=d.router, choices=list(ROUTERS),
                       help="affinity: a job's turns go to the replica holding its lease, within a load "
                            "bound; pow2: Ray's power of two choices; rr: round robin "
                            f"(default: {d.router})")
        g.add_argument("--max-imbalance", type=_at_least(0), default=d.max_imbalance, metavar="N",
                       help="affinity: leave a job's replica when its queue exceeds the least loaded "
                            f"replica's by more than N requests (default: {d.max_imbalance})")
        g.add_argument("--ray-address", default=d.ray_address, metavar="ADDRESS",
                       help="join this Ray cluster ('auto': the running one; default: start a local "
                            "Ray instance on 127.0.0.1)")
        g.add_argument("--routing-stats-period", type=_at_least(0.01, float), default=d.stats_period_s,
                       metavar="S",
                       help=f"seconds between replicas' lease reports (default: {d.stats_period_s:g})")
        g.add_argument("--replica-threads", type=_at_least(1), default=d.replica_threads, metavar="N",
                       help="torch threads per replica (default: the CPU cores shared evenly)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ClusterConfig:
        """The config of parsed ``add_arguments`` flags."""
        return cls(replicas=args.replicas, router=args.router, max_imbalance=args.max_imbalance,
                   ray_address=args.ray_address, stats_period_s=args.routing_stats_period,
                   replica_threads=args.replica_threads)
