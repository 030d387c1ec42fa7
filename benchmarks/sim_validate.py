"""Validate the simulator against a measured ``bench jct`` run: same trace, jobs, pool and policies,
simulated with CPU constants from ``agent-engine sim calibrate``.

    agent-engine bench sim-validate --bench out/jct.json --constants out/sim_cpu_constants.json

Target: simulated mean JCT within 20% of the measured one for every policy.

Invariants: only policies the measured run has and the simulator reproduces without a fitted model
(``SIMULATED``) are compared; the simulated run takes every knob from the measured run's ``config``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agent_engine.reporting import print_table, write_json
from agent_engine.sim.calibrate import DEFAULT_OUT as DEFAULT_CONSTANTS
from agent_engine.sim.policy_label import POLICIES as SIM_POLICIES
from benchmarks.cli import run_standalone

__all__ = ["HELP", "SIMULATED", "add_arguments", "compare", "main", "run"]

TARGET_REL_ERROR = 0.20
# The simulator's policy labels whose TTLs need no fitted model.
SIMULATED: tuple[str, ...] = tuple(p for p in SIM_POLICIES if not p.endswith("-learned"))
HELP = "simulated vs measured bench jct (same trace, jobs, pool and policies)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench sim-validate``."""
    # dest is not "bench": ``agent-engine bench`` keeps the benchmark's name there.
    ap.add_argument("--bench", dest="bench_json", default="out/jct.json",
                    help="JSON written by `bench jct` (default out/jct.json)")
    ap.add_argument("--constants", default=DEFAULT_CONSTANTS,
                    help=f"JSON written by `agent-engine sim calibrate` (default {DEFAULT_CONSTANTS})")
    ap.add_argument("--json", default="out/sim_validate.json", help="results JSON")
    ap.add_argument("--plot", default="out/sim_validate.png", help="PNG: measured vs simulated mean JCT")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def compare(measured: dict[str, float], simulated: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per policy: both mean JCTs, the relative error of the simulated one and whether it meets the target."""
    out = {}
    for p, m in measured.items():
        err = (simulated[p] - m) / m
        out[p] = {"measured_mean_jct_s": m, "simulated_mean_jct_s": simulated[p], "rel_error": err,
                  "pass": abs(err) <= TARGET_REL_ERROR}
    return out


def run(args: argparse.Namespace) -> int:
    """Simulate the bench run's setting, print measured vs simulated per policy, write JSON and the plot."""
    bench = json.loads(Path(args.bench_json).read_text(encoding="utf-8"))
    policies = [p for p in SIMULATED if p in bench["policies"]]
    measured = {p: bench["policies"][p]["mean_jct_s"] for p in policies}
    simulated = {p: _simulate(bench["config"], p, args.constants)
                 for p in tqdm(policies, desc="simulating", disable=args.no_progress)}
    results = compare(measured, simulated)
    print_table(["policy", "measured JCT s", "simulated JCT s", "error", f"within {TARGET_REL_ERROR:.0%}"],
                [[p, r["measured_mean_jct_s"], r["simulated_mean_jct_s"], f"{r['rel_error']:+.1%}",
                  "PASS" if r["pass"] else "FAIL"] for p, r in results.items()])
    payload = {"results": results, "target_rel_error": TARGET_REL_ERROR, "bench": args.bench_json,
               "constants": args.constants}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots_perf import plot_sim_validate

        print(f"wrote {plot_sim_validate(payload, args.plot)}")
    return 0


def _simulate(cfg: dict[str, Any], policy: str, constants: str) -> float:
    """Mean JCT of ``policy`` simulated in the setting ``cfg`` (a ``bench jct`` JSON's ``config``)."""
    from agent_engine.sim.calibrate import simulate_like_bench
    from agent_engine.sim.cost_model import CostConstants

    # ``bench jct`` records the shipped trace as "default (<file>)" (``trace_label``).
    trace = "default" if str(cfg["trace"]).startswith("default") else cfg["trace"]
    res = simulate_like_bench(
        trace, CostConstants.load(constants), [policy], jps=cfg.get("jps"), jobs=cfg["jobs"],
        max_turns=cfg.get("max_turns"), token_scale=cfg["token_scale"], time_scale=cfg["time_scale"],
        seed=cfg["seed"], num_kv_blocks=cfg["num_kv_blocks"], max_num_seqs=cfg["max_num_seqs"],
        max_model_len=cfg["max_model_len"], block_size=cfg["block_size"],
    )
    return float(res["policies"][policy]["mean_jct_s"])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.sim_validate``: the flags and run of ``agent-engine bench sim-validate``."""
    return run_standalone("sim-validate", argv)


if __name__ == "__main__":
    raise SystemExit(main())
