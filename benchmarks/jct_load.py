"""Mean JCT vs offered load: ``bench jct`` repeated over Poisson arrival rates (``--jps-list``).

Invariants: every load point replays the same jobs with the same seed (arrival gaps scale with
1/jps); every policy starts a fresh server per load point; the JSON holds one ``bench jct``-style
``policies`` section per load, in the order given.
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
from benchmarks.jct_config import add_jct_args, config_from_args, config_payload, load_trace_jobs
from benchmarks.jct_regime import settle_and_print
from benchmarks.jct_runner import run_policies

HELP = "mean JCT vs job arrival rate per policy"

__all__ = ["HELP", "add_arguments", "main", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``bench jct`` flags (without --json/--plot defaults) plus ``--jps-list``."""
    add_jct_args(p, with_outputs=False)
    p.add_argument("--jps-list", default="0.05,0.1,0.2", help="comma list of job arrival rates (jobs/s)")
    p.add_argument("--json", default="out/jct_load.json", help="results JSON")
    p.add_argument("--plot", default="out/jct_load.png", help="PNG: mean JCT vs load per policy")


def run(args: argparse.Namespace) -> int:
    """Run every policy at every load, print a mean-JCT table (rows: loads), write JSON and plot."""
    loads = [float(x) for x in args.jps_list.split(",") if x.strip()]
    base = config_from_args(args)
    jobs, trace_name = load_trace_jobs(base.trace, base.jobs, base.seed)
    base, regime = settle_and_print(base, jobs)
    t0 = time.perf_counter()
    points: list[dict[str, Any]] = []
    for jps in loads:
        print(f"=== load {jps:g} jobs/s ===", flush=True)
        cfg = replace(base, jps=jps, concurrency=args.concurrency)
        runs = run_policies(cfg, jobs)
        points.append({"jps": jps, "policies": {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()}})
    names = list(dict.fromkeys(n for p in points for n in p["policies"]))
    print_table(["jobs/s", *[f"{n} mean JCT" for n in names]],
                [[p["jps"], *[(p["policies"].get(n) or {}).get("mean_jct_s") for n in names]] for p in points])
    config = config_payload(replace(base, jps=None), trace_name, jobs, regime.to_dict())
    config.update(jps_list=loads, total_wall_s=round(time.perf_counter() - t0, 1),
                  loadavg_end=list(os.getloadavg()))
    payload = {"loads": points, "config": config}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots import plot_load

        print(f"wrote {plot_load(payload, args.plot)}")
    failed = any(r.get("jobs_failed") for p in points for r in p["policies"].values())
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.jct_load``: the flags and run of ``agent-engine bench jct-load``."""
    return run_standalone("jct-load", argv)


if __name__ == "__main__":
    sys.exit(main())
