"""``bench jct --replicas N --routers affinity,pow2,rr``: the same JCT runs against N engine replicas.

With ``--replicas N > 1`` every row (policy x hint style) runs once per router, each against a fresh
``agent-engine serve --replicas N --router R`` (Ray Serve, one ingress on one port); the row name
gains ``+router=R``. Each replica gets the row's engine flags (so ``--num-kv-blocks`` is per replica).
Every row also reports ``next_turn_reuse`` (``agent_engine.routing.next_turn_reuse`` over the replay's
turn records: the share of each turn's previous context that the next turn found cached), and a
cluster table is printed: mean and p90 JCT and next-turn reuse per router.

Invariants: with ``--replicas 1`` (the default) nothing here changes a row or its name; ``vllm-cpu``
is never replicated; router names are ``agent_engine.routing.ROUTERS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_engine.reporting import print_table
from agent_engine.routing import ROUTERS, next_turn_reuse
from agent_engine.workloads.replay.records import TurnRecord

ROUTER_SEP = "+router="
CLUSTER_STARTUP_TIMEOUT_S = 420.0


def parse_routers(text: str) -> tuple[str, ...]:
    """``--routers``: a comma list of ``ROUTERS`` (``ValueError`` on an unknown or empty list)."""
    names = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in names if r not in ROUTERS]
    if bad or not names:
        raise ValueError(f"--routers: unknown router(s) {bad}; known: {', '.join(ROUTERS)}")
    return names


def with_routers(names: Sequence[str], replicas: int, routers: Sequence[str]) -> list[str]:
    """Each row name once per router when ``replicas > 1`` (``vllm-cpu`` stays single)."""
    if replicas <= 1:
        return list(names)
    return [n if n == "vllm-cpu" else f"{n}{ROUTER_SEP}{r}" for n in names for r in routers
            if n != "vllm-cpu" or r == routers[0]]


def split_router(name: str) -> tuple[str, str | None]:
    """``(row name without the router, router or None)``."""
    base, sep, router = name.rpartition(ROUTER_SEP)
    return (base, router) if sep else (name, None)


def cluster_args(replicas: int, router: str | None) -> list[str]:
    """The ``serve`` flags of a row's router (none for a single server)."""
    if router is None or replicas <= 1:
        return []
    return ["--replicas", str(replicas), "--router", router]


def turn_reuse(turns: Sequence[TurnRecord]) -> float | None:
    """``next_turn_reuse`` of a replay's turn records (failed turns and turns without a cache count are
    left out)."""
    by_job: dict[str, list[TurnRecord]] = {}
    for t in turns:
        if t.error is None and t.cached_tokens is not None:
            by_job.setdefault(t.job_id, []).append(t)
    return next_turn_reuse([[(t.prompt_tokens, t.output_tokens, t.cached_tokens or 0)
                             for t in sorted(ts, key=lambda x: x.turn)] for ts in by_job.values()])


def print_cluster_table(rows: Mapping[str, Mapping[str, Any]], replicas: int) -> str:
    """Mean JCT, p90 JCT and next-turn reuse per router row."""
    table = [[name, row.get("mean_jct_s"), row.get("p90_jct_s"), row.get("next_turn_reuse"),
              row.get("prefix_hit_ratio"), row.get("jobs_failed"), (row.get("routing") or {}).get("affinity"),
              (row.get("routing") or {}).get("lost_leases")]
             for name, row in rows.items() if split_router(name)[1] is not None]
    print(f"{replicas} replicas:")
    return print_table(["row", "mean JCT s", "p90 JCT s", "next-turn reuse", "hit ratio", "failed",
                        "affinity", "lost leases"], table)


def fetch_routing(base_url: str, timeout: float = 10.0) -> dict[str, int]:
    """The ingress router's decision counters (``GET /cluster/replicas``); empty when unavailable."""
    import httpx

    try:
        routers = httpx.get(base_url.rstrip("/") + "/cluster/replicas", timeout=timeout).json()["routers"]
    except (httpx.HTTPError, KeyError, ValueError):
        return {}
    out: dict[str, int] = {}
    for r in routers:
        for k, v in r.get("counters", {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out
