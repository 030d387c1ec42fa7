"""``agent-engine bench jct``: job completion time (JCT) of agent jobs under each scheduling policy.

For every policy: start a fresh server subprocess (same model, same KV budget, same block size), replay
the same jobs with the same seed and arrival pattern, scrape ``/metrics``, stop the server. Then a
table, a JSON file, a PNG, and the checks of CONTINUUM against FCFS (printed PASS/FAIL, never
asserted). The setting is in ``jct_config``, the runs in ``jct_runner``, the verdicts in ``jct_report``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from agent_engine.reporting import write_json
from benchmarks.cli import run_standalone
from benchmarks.jct_config import add_jct_args, config_from_args, config_payload, load_trace_jobs
from benchmarks.jct_regime import settle_and_print
from benchmarks.jct_report import checks_per_round, compute_checks, format_check, print_results
from benchmarks.jct_runner import run_policies

HELP = "job completion time per scheduling policy (a fresh server each)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``bench jct`` (see ``jct_config.add_jct_args``)."""
    add_jct_args(p)


def run(args: argparse.Namespace) -> int:
    """``bench jct``: run, print, write JSON and the plot; 0 unless a job failed."""
    cfg = config_from_args(args)
    jobs, trace_name = load_trace_jobs(cfg.trace, cfg.jobs, cfg.seed)
    cfg, regime = settle_and_print(cfg, jobs)
    config = config_payload(cfg, trace_name, jobs, regime.to_dict())
    t0 = time.perf_counter()
    runs = run_policies(cfg, jobs)
    rows = {n: r.row for n, r in runs.items()}
    checks = compute_checks(rows)
    per_round = checks_per_round(rows)
    config.update(total_wall_s=round(time.perf_counter() - t0, 1), loadavg_end=list(os.getloadavg()))
    print(f"trace {trace_name}: {len(jobs)} jobs, pool {cfg.num_kv_blocks} x {cfg.block_size} tokens, token scale "
          f"{cfg.token_scale:g}, time scale {cfg.time_scale:g}; total {config['total_wall_s']:.0f} s")
    print(regime.line())
    print_results(rows, checks)
    for i, rc in enumerate(per_round):
        print(f"round {i + 1}: " + "; ".join(format_check(c) for c in rc.values()))
    payload = {"policies": {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()},
               "config": config, "checks": checks, "checks_per_round": per_round}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots import plot_jct

        plot_jct(payload, args.plot)
        print(f"wrote {args.plot}")
    return 1 if any(r.row.get("jobs_failed") for r in runs.values()) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.jct``: the flags and run of ``agent-engine bench jct``."""
    return run_standalone("jct", argv)


if __name__ == "__main__":
    sys.exit(main())
