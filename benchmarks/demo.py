"""``make demo``: agent jobs on the embedded default model (or ``--model``), FCFS vs CONTINUUM, side by side.

Synthesizes a small ``swe`` trace (``DEMO_JOBS`` jobs, ``DEMO_TURNS`` turns), measures this machine's
prompt processing and settles the regime (``jct_regime``: the token scale, time scale and KV pool
that put re-prefill against tool seconds and KV pressure where the paper's setting has them), prints
the regime line, then for each policy starts a fresh server subprocess on 127.0.0.1 with the same KV
pool, replays the same jobs, and prints the JCT table; the plot goes to ``out/demo_jct.png`` and the
JSON next to it.

Invariants: FCFS and CONTINUUM see the same trace, scales and pool (settled once, before either
starts); the demo prints the JCT ratio and never judges the acceptance checks (those belong to
``bench jct``; the JSON still records them); about three minutes on a fresh 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_engine.workloads.traces import TraceJob
    from benchmarks.jct_config import JCTConfig

__all__ = ["DEMO_JOBS", "HELP", "add_arguments", "demo_config", "main", "run_demo"]

DEMO_JOBS = 8
DEMO_TURNS = 6
DEMO_BLOCK_SIZE = 32
DEMO_MAX_MODEL_LEN = 4096  # the embedded model's context


def demo_config(out_dir: str = "out") -> tuple[JCTConfig, list[TraceJob]]:
    """The demo's ``JCTConfig`` (token scale, time scale and pool left to the measured regime) and its
    synthesized jobs."""
    from agent_engine.workloads.traces import load_trace
    from benchmarks.jct_config import JCTConfig
    from benchmarks.jct_regime import MATCHABLE

    jobs = load_trace("synth:swe", max_jobs=DEMO_JOBS, seed=0)
    cfg = JCTConfig(trace="synth:swe", policies=("fcfs", "continuum"), concurrency=DEMO_JOBS, jobs=DEMO_JOBS,
                    max_turns=DEMO_TURNS, block_size=DEMO_BLOCK_SIZE, max_model_len=DEMO_MAX_MODEL_LEN,
                    log_dir=str(Path(out_dir) / "demo_logs"), match=frozenset(MATCHABLE))
    return cfg, list(jobs)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo (``args.out_dir`` optional, default ``out``); returns 0 unless a job failed."""
    from agent_engine.reporting import write_json
    from benchmarks.jct_config import config_payload
    from benchmarks.jct_regime import settle_and_print
    from benchmarks.jct_report import compute_checks, print_results
    from benchmarks.jct_runner import run_policies
    from benchmarks.plots import plot_jct

    out_dir = getattr(args, "out_dir", None) or "out"
    cfg, jobs = demo_config(out_dir)
    if getattr(args, "model", None):  # fetched (its metadata cached) once here, not in each server's start-up
        from agent_engine.model.gguf_native import prepare_native

        prepare_native(args.model)
        cfg = replace(cfg, extra_engine_args=(*cfg.extra_engine_args, "--model", args.model))
    t0 = time.perf_counter()
    cfg, regime = settle_and_print(cfg, jobs)
    print(f"demo: {DEMO_JOBS} synthesized swe agent jobs x {DEMO_TURNS} turns, token scale "
          f"{cfg.token_scale:g}, time scale {cfg.time_scale:g}, KV pool {cfg.num_kv_blocks} blocks x "
          f"{cfg.block_size} tokens; FCFS vs CONTINUUM", flush=True)
    runs = run_policies(cfg, jobs)
    rows = {n: r.row for n, r in runs.items()}
    checks = compute_checks(rows)
    print(regime.line())
    print_results(rows, {})  # the acceptance checks belong to `bench jct` on the real trace
    f, c = rows.get("fcfs", {}).get("mean_jct_s"), rows.get("continuum", {}).get("mean_jct_s")
    if f and c:
        print(f"CONTINUUM mean JCT = {c / f:.2f} x FCFS "
              f"(prefix-hit ratio {rows['fcfs'].get('prefix_hit_ratio', 0):.2f} -> "
              f"{rows['continuum'].get('prefix_hit_ratio', 0):.2f})")
    payload = {"policies": {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()},
               "config": {**config_payload(cfg, "synth:swe", jobs), "regime": regime.to_dict()}, "checks": checks}
    write_json(Path(out_dir) / "demo_jct.json", payload)
    print(f"wrote {plot_jct(payload, Path(out_dir) / 'demo_jct.png')} ({time.perf_counter() - t0:.0f} s in all)")
    return 1 if any(r.get("jobs_failed") for r in rows.values()) else 0


HELP = "the quick-start demo: FCFS vs CONTINUUM on synthesized agent jobs (about a minute)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", default="out", help="where the JCT table (JSON) and plot go")
    parser.add_argument("--model", default=None,
                        help="model to serve: a known name (smollm2), a .gguf file or an HF folder "
                             "(default: the embedded model)")
    parser.set_defaults(func=run_demo)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m benchmarks.demo``."""
    p = argparse.ArgumentParser(prog="agent-engine demo", description=HELP)
    add_arguments(p)
    args = p.parse_args(argv)
    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
