"""``agent-engine sim --replicas N --routers affinity,pow2,rr``: routing policies on N simulated replicas.

Every (policy, router, load) point is one ``simulate_cluster`` run of the same jobs on the same
replicas (each configured like the single-engine ``sim`` run: the same engine flags, cost model and
KV pool per replica). Prints one table (mean and p90 JCT, next-turn reuse, prefix hit ratio, the
router's decisions) and writes ``{"replicas", "points": [...], "setup"}`` to ``--json``
(default ``out/sim_cluster_<gpu>_<model>_x<N>.json``).

Invariants: points are deterministic, so the output does not depend on ``--workers``; routers are
the names of ``agent_engine.routing.ROUTERS``; a bad name is a clean error before any point runs.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from agent_engine.json_types import JsonObject, JsonValue
from agent_engine.routing import ROUTERS
from agent_engine.routing.policies import DEFAULT_MAX_IMBALANCE
from agent_engine.sim.sim_config import SweepSetup

__all__ = ["add_cluster_args", "cmd_cluster"]


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """``--replicas``, ``--routers``, ``--max-imbalance`` (the run flags of ``sim`` apply per replica)."""
    g = p.add_argument_group("cluster (N > 1: route jobs between N replicas, each one simulated GPU)")
    g.add_argument("--replicas", type=int, default=1, help="simulated engine replicas (default 1)")
    g.add_argument("--routers", default=",".join(ROUTERS),
                   help=f"comma list of {', '.join(ROUTERS)} (with --replicas > 1)")
    g.add_argument("--max-imbalance", type=int, default=DEFAULT_MAX_IMBALANCE,
                   help=f"affinity: the load bound in requests (default {DEFAULT_MAX_IMBALANCE})")


def _routers(text: str) -> list[str]:
    names = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in names if r not in ROUTERS]
    if bad or not names:
        raise SystemExit(f"unknown router(s) {bad}; known: {', '.join(ROUTERS)}")
    return names


_worker: JsonObject = {}


def _init(jobs: list[JsonValue], cost: Any) -> None:
    _worker["jobs"], _worker["cost"] = jobs, cost


def _point(task: tuple[Any, int, str, int]) -> JsonObject:
    from agent_engine.sim.cluster import simulate_cluster

    cfg, replicas, router, imbalance = task
    res = simulate_cluster(_worker["jobs"], _worker["cost"], cfg, replicas, router, max_imbalance=imbalance,
                           seed=cfg.seed)
    return {"policy": cfg.label, "router": router, "jps": cfg.jps, **res.summary()}


def _run_points(jobs: list[JsonValue], cost: Any, tasks: list[tuple[Any, int, str, int]],
                workers: int) -> list[JsonObject]:
    if workers <= 1:
        _init(jobs, cost)
        return [_point(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers, initializer=_init, initargs=(jobs, cost)) as ex:
        return list(ex.map(_point, tasks))


def _print(points: list[JsonObject]) -> None:
    from agent_engine.reporting import print_table

    headers = ["policy", "router", "jps", "mean JCT s", "p90 JCT s", "next-turn reuse", "hit", "preempt",
               "affinity", "placed", "ended", "overload", "turns/replica min-max", "wall s"]
    rows = []
    for p in points:
        r, turns = p["routing"], p["replica_turns"]
        rows.append([p["policy"], p["router"], p["jps"], p["mean_jct_s"], p["p90_jct_s"],
                     p["next_turn_reuse"], p["prefix_hit_ratio"], p["preemptions"], r.get("affinity"),
                     r.get("placed"),
                     r.get("ended_leases"), r.get("overload_fallbacks"), f"{min(turns)}-{max(turns)}",
                     p["wall_seconds"]])
    print_table(headers, rows)


def cmd_cluster(args: argparse.Namespace, run: SweepSetup, out: str) -> int:
    """The cluster run of ``agent-engine sim`` (``sim``'s run when ``--replicas > 1``): every policy x
    load x router of ``run``; prints the table and writes the JSON to ``out``."""
    from agent_engine.reporting import write_json

    routers = _routers(args.routers)
    base = run.base
    print(f"sim cluster: {args.replicas} x {args.model} on {args.constants or args.gpu} tp={args.tp}, "
          f"{base.num_blocks} KV blocks each; {len(run.jobs)} jobs of {run.trace}; routers {routers}")
    tasks = [(base.for_label(p, jps), args.replicas,
              router, args.max_imbalance) for p in run.policies for jps in run.loads for router in routers]
    points = _run_points(run.jobs, run.cost, tasks, args.workers)
    _print(points)
    setup = {k: v for k, v in vars(args).items() if k != "func"}
    write_json(out, {"replicas": args.replicas, "points": points,
                     "setup": setup | {"num_kv_blocks": base.num_blocks, "max_model_len": base.max_model_len,
                                       "trace": run.trace}})
    return 0
