"""``bench jct``'s setting in the calibrated simulator, over several disjoint job slices of a trace.

    agent-engine bench sim-slices --constants out/sim_cpu_constants.json --caps 0.5,0.7 --soft on,off

One measured ``bench jct`` run replays one 16-job slice and is chaotic (a pin made or refused early
changes every later decision), so a scheduler change is judged here first: for each slice
``[k * jobs, (k + 1) * jobs)`` of the trace, FCFS, ``unlimited`` (FCFS with a pool that never
evicts) and each CONTINUUM policy at each pinned-fraction cap run on the real scheduler with the CPU
step-time constants of ``agent-engine sim calibrate``. Reported per (policy, cap, soft pins on or
off): the mean over slices of mean JCT / FCFS and of the share of FCFS's excess over ``unlimited``
removed, and the worst slice.

Invariants: deterministic (the same inputs give the same table); the trace comes from the one
resolver (``load_trace``: the shipped trace by default, ``synth:PROFILE`` or a path); only whole
slices run (a trace shorter than one slice is a ``ValueError``).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from agent_engine.reporting import print_table, write_json
from agent_engine.sim.calibrate import DEFAULT_OUT as DEFAULT_CONSTANTS
from agent_engine.sim.policy_label import POLICIES as SIM_POLICIES
from agent_engine.workloads.traces import TraceJob, load_trace, trace_label
from benchmarks.cli import run_standalone

__all__ = ["HELP", "add_arguments", "main", "run", "simulate_slices"]

HELP = "bench jct's setting in the calibrated simulator over disjoint trace slices"
SOFT = {"on": True, "off": False}


@dataclass(frozen=True)
class _SliceSim:
    """Simulates one policy on one slice; everything but the policy, slice, pool, cap and soft pins."""

    jobs: Sequence[TraceJob]
    constants: Any
    slice_jobs: int
    max_turns: int
    token_scale: float
    block_size: int
    max_model_len: int
    seed: int

    def mean_jct(self, policy: str, k: int, blocks: int, cap: float = 0.5, soft: bool = True) -> float:
        """Simulated mean JCT of ``policy`` on slice ``k`` with a pool of ``blocks``."""
        from agent_engine.sim.calibrate import simulate_like_bench

        res = simulate_like_bench(self.jobs, self.constants, [policy], jobs=self.slice_jobs,
                                  max_turns=self.max_turns, token_scale=self.token_scale, seed=self.seed,
                                  num_kv_blocks=blocks, max_model_len=self.max_model_len,
                                  block_size=self.block_size, max_pinned_fraction=cap,
                                  first_job=k * self.slice_jobs, soft_pins=soft)
        return float(res["policies"][policy]["mean_jct_s"])


def _row(policy: str, cap: float, soft: bool, means: dict[int, float],
         base: dict[int, tuple[float, float]]) -> dict[str, Any]:
    """One table row from a policy's mean JCT per slice and FCFS's (limited, unlimited) per slice."""
    ratios = [means[k] / base[k][0] for k in means]
    removed = [(f - means[k]) / (f - u) if f > u else float("nan") for k, (f, u) in base.items()]
    return {"policy": policy, "cap": cap, "soft_pins": soft, "ratio_vs_fcfs": statistics.fmean(ratios),
            "excess_removed": statistics.fmean(removed), "worst_excess_removed": min(removed),
            "per_slice_excess_removed": removed}


def simulate_slices(
    trace: str | None, constants: str, policies: Sequence[str], caps: Sequence[float], slices: int = 6,
    jobs: int = 16, softs: Sequence[bool] = (True,), max_turns: int = 20, token_scale: float = 0.1,
    num_kv_blocks: int = 144, block_size: int = 32, unlimited_blocks: int = 1200, max_model_len: int = 4096,
    seed: int = 0, progress: bool = False,
) -> dict[str, Any]:
    """``{"rows": [{policy, cap, soft_pins, ratio_vs_fcfs, excess_removed, worst_excess_removed,
    per_slice_excess_removed}], "slices": [k...], "fcfs_unlimited_mean_jct_s": {k: (fcfs, unlimited)}}``."""
    from agent_engine.sim.cost_model import CostConstants

    all_jobs = load_trace(trace, max_jobs=slices * jobs, seed=seed)
    ks = [k for k in range(slices) if len(all_jobs) >= (k + 1) * jobs]
    if not ks:
        raise ValueError(f"the trace has fewer than {jobs} jobs")
    sim = _SliceSim(all_jobs, CostConstants.load(constants), jobs, max_turns, token_scale, block_size,
                    min(max_model_len, (num_kv_blocks - 1) * block_size), seed)  # every pool holds one request
    settings = list(itertools.product(softs, caps, policies))
    bar = tqdm(total=len(ks) * (2 + len(settings)), desc="sim slices", disable=not progress)
    base = {}
    for k in ks:
        base[k] = (sim.mean_jct("fcfs", k, num_kv_blocks), sim.mean_jct("fcfs", k, unlimited_blocks))
        bar.update(2)
    rows = []
    for soft, cap, pol in settings:
        means = {}
        for k in ks:
            means[k] = sim.mean_jct(pol, k, num_kv_blocks, cap, soft)
            bar.update()
        rows.append(_row(pol, cap, soft, means, base))
    bar.close()
    return {"rows": rows, "slices": ks, "fcfs_unlimited_mean_jct_s": base}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench sim-slices``."""
    ap.add_argument("--trace", default=None,
                    help="trace JSONL, synth:<profile> or default (default: the shipped agent trace)")
    ap.add_argument("--constants", default=DEFAULT_CONSTANTS,
                    help=f"JSON written by `agent-engine sim calibrate` (default {DEFAULT_CONSTANTS})")
    ap.add_argument("--policies", default="continuum,continuum-fixed",
                    help=f"comma list of {', '.join(p for p in SIM_POLICIES if p != 'fcfs')}")
    ap.add_argument("--caps", default="0.5", help="comma list of --max-pinned-fraction values")
    ap.add_argument("--soft", default="on", help="comma list of soft-pin settings: on, off")
    ap.add_argument("--slices", type=int, default=6, help="disjoint job slices (default 6)")
    ap.add_argument("--jobs", type=int, default=16, help="jobs per slice (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="replay seed (and synth: trace seed)")
    ap.add_argument("--json", default="out/sim_slices.json", help="results JSON")
    ap.add_argument("--plot", default="out/sim_slices.png", help="PNG: excess removed per setting")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Simulate every slice, print the table, write JSON and a bar chart of the excess removed."""
    softs = [s.strip() for s in args.soft.split(",") if s.strip()]
    if not set(softs) <= set(SOFT):
        raise SystemExit(f"--soft takes on and/or off, not {args.soft!r}")
    res = simulate_slices(args.trace, args.constants, [p for p in args.policies.split(",") if p],
                          [float(c) for c in args.caps.split(",")], slices=args.slices, jobs=args.jobs,
                          softs=[SOFT[s] for s in softs], seed=args.seed, progress=not args.no_progress)
    rows = res["rows"]
    print_table(["policy", "cap", "soft pins", "mean JCT / fcfs", "excess removed", "worst slice"],
                [[r["policy"], r["cap"], "on" if r["soft_pins"] else "off", r["ratio_vs_fcfs"],
                  f"{r['excess_removed']:.1%}", f"{r['worst_excess_removed']:.1%}"] for r in rows])
    payload = {**res, "trace": trace_label(args.trace), "constants": args.constants}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots_perf import plot_sim_slices

        print(f"wrote {plot_sim_slices(payload, args.plot)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.sim_slices``: the flags and run of ``agent-engine bench sim-slices``."""
    return run_standalone("sim-slices", argv)


if __name__ == "__main__":
    raise SystemExit(main())
