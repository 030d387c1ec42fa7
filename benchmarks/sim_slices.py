"""``bench jct``'s setting in the calibrated simulator, over several disjoint job slices of a trace.

    agent-engine bench sim-slices --constants out/sim_cpu_constants.json --caps 0.5,0.7 --soft on,off

One measured ``bench jct`` run replays one 16-job slice and is chaotic (a pin made or refused early
changes every later decision), so a scheduler change is judged here first: for each slice
``[k * jobs, (k + 1) * jobs)`` of the trace, FCFS, ``unlimited`` (FCFS with a pool that never
evicts) and each CONTINUUM policy at each pinned-fraction cap run on the real scheduler with the CPU
step-time constants of ``agent-engine sim calibrate``. Reported per (policy, cap, soft pins on or
off): the mean over slices of mean JCT / FCFS and of the share of FCFS's excess over ``unlimited``
removed, and the worst slice. Deterministic: the same inputs give the same table.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Sequence
from typing import Any

from agent_engine.reporting import print_table, write_json
from agent_engine.workloads.traces import DEFAULT_TRACE, trace_label
from benchmarks.plots import plot_bars

__all__ = ["HELP", "add_arguments", "main", "run", "simulate_slices"]


def simulate_slices(
    trace: str, constants: str, policies: Sequence[str], caps: Sequence[float], slices: int = 6, jobs: int = 16,
    softs: Sequence[bool] = (True,), max_turns: int = 20, token_scale: float = 0.1, num_kv_blocks: int = 144, block_size: int = 32,
    unlimited_blocks: int = 1200, max_model_len: int = 4096,
) -> dict[str, Any]:
    """``{"rows": [{policy, cap, soft_pins, ratio_vs_fcfs, excess_removed, worst_excess_removed, per_slice}], ...}``."""
    from agent_engine.sim.calibrate import simulate_like_bench
    from agent_engine.sim.cost_model import CostConstants
    from agent_engine.workloads.traces.format import read_jobs

    consts = CostConstants.load(constants)
    all_jobs = read_jobs(trace)
    max_len = min(max_model_len, (num_kv_blocks - 1) * block_size)  # every pool must hold one request

    def mean_jct(policy: str, k: int, blocks: int, cap: float = 0.5, soft: bool = True) -> float:
        res = simulate_like_bench(all_jobs, consts, [policy], jobs=jobs, max_turns=max_turns,
                                  token_scale=token_scale, num_kv_blocks=blocks, max_model_len=max_len,
                                  block_size=block_size, max_pinned_fraction=cap, first_job=k * jobs,
                                  soft_pins=soft)
        return float(res["policies"][policy]["mean_jct_s"])

    ks = [k for k in range(slices) if len(all_jobs) >= (k + 1) * jobs]
    if not ks:
        raise ValueError(f"the trace has fewer than {jobs} jobs")
    base = {k: (mean_jct("fcfs", k, num_kv_blocks), mean_jct("fcfs", k, unlimited_blocks)) for k in ks}
    rows = []
    for soft, cap, pol in itertools.product(softs, caps, policies):
        ratios, removed = [], []
        for k in ks:
            m = mean_jct(pol, k, num_kv_blocks, cap, soft)
            fcfs, unl = base[k]
            ratios.append(m / fcfs)
            removed.append((fcfs - m) / (fcfs - unl) if fcfs > unl else float("nan"))
        rows.append({"policy": pol, "cap": cap, "soft_pins": soft, "ratio_vs_fcfs": statistics.fmean(ratios),
                     "excess_removed": statistics.fmean(removed), "worst_excess_removed": min(removed),
                     "per_slice_excess_removed": removed})
    return {"rows": rows, "slices": ks, "fcfs_unlimited_mean_jct_s": base}


HELP = "bench jct's setting in the calibrated simulator over disjoint trace slices"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--trace", default=None, help="trace JSONL or synth:<profile> (default: the shipped trace)")
    ap.add_argument("--constants", required=True, help="JSON written by `agent-engine sim calibrate`")
    ap.add_argument("--policies", default="continuum,continuum-fixed")
    ap.add_argument("--caps", default="0.5", help="comma list of --max-pinned-fraction values")
    ap.add_argument("--soft", default="on", help="comma list of soft-pin settings: on, off")
    ap.add_argument("--slices", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--json", default="out/sim_slices.json")
    ap.add_argument("--plot", default="out/sim_slices.png")


def run(args: argparse.Namespace) -> int:
    """Simulate every slice, print the table, write JSON and a bar chart of the excess removed."""
    onoff = {"on": True, "off": False}
    if not set(args.soft.split(",")) <= set(onoff):
        raise SystemExit(f"--soft takes on and/or off, not {args.soft!r}")
    trace = args.trace or str(DEFAULT_TRACE)
    res = simulate_slices(trace, args.constants, [p for p in args.policies.split(",") if p],
                          [float(c) for c in args.caps.split(",")], slices=args.slices, jobs=args.jobs,
                          softs=[onoff[s] for s in args.soft.split(",")])
    rows = res["rows"]
    print_table(["policy", "cap", "soft pins", "mean JCT / fcfs", "excess removed", "worst slice"],
                [[r["policy"], r["cap"], "on" if r["soft_pins"] else "off", r["ratio_vs_fcfs"],
                  f"{r['excess_removed']:.1%}", f"{r['worst_excess_removed']:.1%}"] for r in rows])
    write_json(args.json, {**res, "trace": trace_label(args.trace), "constants": args.constants})
    bars = {f"{r['policy']} cap {r['cap']} soft {'on' if r['soft_pins'] else 'off'}": 100 * r["excess_removed"]
            for r in rows}
    print(f"wrote {plot_bars(args.plot, 'FCFS excess over unlimited removed', bars, '% (mean over slices)')}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.sim_slices ...`` (same flags as ``agent-engine bench sim-slices``)."""
    ap = argparse.ArgumentParser(prog="agent-engine bench sim-slices", description=HELP)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
