"""CONTINUUM TTL sweep: fixed pin thresholds and the ``paper`` and ``learned`` policies on one trace.

Each setting is a ``bench jct`` policy name (``continuum-fixed@X``, ``continuum``, ``continuum-learned``)
run on a fresh server with the same jobs, seed and KV pool. The best setting is the one with the
lowest mean JCT (ties: fewer pinned block-seconds).

Invariant: a setting whose jobs failed is never chosen as best.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent_engine.reporting import print_table, write_json
from benchmarks.cli import run_standalone
from benchmarks.jct_config import (
    add_jct_args,
    config_from_args,
    config_payload,
    load_trace_jobs,
    policy_engine_args,
)
from benchmarks.jct_regime import settle_and_print
from benchmarks.jct_runner import run_policies

HELP = "CONTINUUM TTL settings: JCT and pinned block-seconds"

__all__ = ["HELP", "add_arguments", "best_setting", "default_vs_best_fixed", "main", "recommendation", "run",
           "sweep_policies"]


def sweep_policies(thresholds: Sequence[float], paper: bool = True, learned: bool = True) -> list[str]:
    """Policy names of the sweep: one ``continuum-fixed@X`` per threshold, then paper and learned."""
    names = [f"continuum-fixed@{t:g}" for t in thresholds]
    return names + (["continuum"] if paper else []) + (["continuum-learned"] if learned else [])


def best_setting(settings: dict[str, dict[str, Any]]) -> str | None:
    """Lowest mean JCT among settings without failed jobs (ties: fewer pinned block-seconds)."""
    ok = [(r["mean_jct_s"], (r.get("pins") or {}).get("pinned_block_seconds", 0.0), n)
          for n, r in settings.items() if r.get("mean_jct_s") is not None and not r.get("jobs_failed")]
    return min(ok)[2] if ok else None


def default_vs_best_fixed(settings: dict[str, dict[str, Any]], default: str = "continuum") -> float | None:
    """Mean JCT of the default TTL policy (``continuum``: paper) over the best fixed threshold's (the
    target is <= 1.03); None when either is missing or failed."""
    fixed = {n: r for n, r in settings.items() if n.startswith("continuum-fixed@")}
    best = best_setting(fixed)
    ref = settings.get(default)
    if best is None or ref is None or ref.get("jobs_failed") or ref.get("mean_jct_s") is None:
        return None
    return ref["mean_jct_s"] / settings[best]["mean_jct_s"]


def recommendation(best: str | None) -> str | None:
    """The serve flags of the best setting (``agent-engine serve --policy continuum --ttl-policy ...``)."""
    return None if best is None else "agent-engine serve " + " ".join(policy_engine_args(best))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``bench jct`` flags (its --policies unused) plus the sweep's own."""
    add_jct_args(p, with_outputs=False)
    p.add_argument("--thresholds", default="0.5,1,2,4", help="fixed-policy pin thresholds (seconds)")
    p.add_argument("--no-paper", action="store_true", help="leave out the paper policy")
    p.add_argument("--no-learned", action="store_true", help="leave out the learned policy")
    p.add_argument("--with-fcfs", action="store_true", help="add an fcfs row for reference")
    p.add_argument("--json", default="out/ttl_sweep.json", help="results JSON")
    p.add_argument("--plot", default="out/ttl_sweep.png", help="PNG: mean JCT and pinned block-seconds per setting")


def run(args: argparse.Namespace) -> int:
    """Run the sweep, print the table and the best setting, write JSON and the plot."""
    thresholds = [float(x) for x in args.thresholds.split(",") if x.strip()]
    names = sweep_policies(thresholds, not args.no_paper, not args.no_learned)
    cfg = replace(config_from_args(args), policies=tuple((["fcfs"] if args.with_fcfs else []) + names),
                  vllm=None)
    jobs, trace_name = load_trace_jobs(cfg.trace, cfg.jobs, cfg.seed)
    cfg, regime = settle_and_print(cfg, jobs)
    t0 = time.perf_counter()
    runs = run_policies(cfg, jobs)
    settings = {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()}
    best = best_setting({n: r for n, r in settings.items() if n != "fcfs"})
    print_table(["setting", "mean JCT", "p90", "hit ratio", "pins created", "pins hit", "pins expired",
                 "pinned blk*s"],
                [[n, r["mean_jct_s"], r["p90_jct_s"], r["prefix_hit_ratio"], r["pins"].get("created"),
                  r["pins"].get("hit"), r["pins"].get("expired"), r["pins"].get("pinned_block_seconds")]
                 for n, r in settings.items()])
    ratio = default_vs_best_fixed(settings)
    print(f"best setting: {best}; default (paper) / best fixed mean JCT = "
          f"{'-' if ratio is None else f'{ratio:.3f}'} (want <= 1.03)")
    print(regime.line())
    recommended = recommendation(best)
    if recommended:
        print(f"recommended for this trace in this regime: {recommended}")
    config = config_payload(cfg, trace_name, jobs, regime.to_dict())
    config.update(total_wall_s=round(time.perf_counter() - t0, 1), loadavg_end=list(os.getloadavg()))
    payload = {"settings": settings, "best": best, "default_vs_best_fixed": ratio, "config": config,
               "recommended": recommended}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots import plot_sweep

        print(f"wrote {plot_sweep(payload, args.plot)}")
    return 1 if any(r.get("jobs_failed") for r in settings.values()) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.ttl_sweep``: the flags and run of ``agent-engine bench ttl-sweep``."""
    return run_standalone("ttl-sweep", argv)


if __name__ == "__main__":
    sys.exit(main())
