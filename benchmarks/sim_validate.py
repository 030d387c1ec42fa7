"""Validate the simulator against a measured ``bench jct`` run: same trace, jobs, pool and policies,
simulated with CPU constants from ``agent-engine sim calibrate``.

    agent-engine bench sim-validate --bench out/jct_shared.json --constants out/sim_cpu_constants.json

Target: simulated mean JCT within 20% of the measured one for every policy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent_engine.reporting import print_table, write_json
from benchmarks.plots import plot_bars

TARGET_REL_ERROR = 0.20
_SIMULATED = ("fcfs", "continuum", "continuum-fixed")


HELP = "simulated vs measured bench jct (same trace, jobs, pool and policies)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--bench", required=True, help="JSON written by `bench jct`")
    ap.add_argument("--constants", required=True, help="JSON written by `sim calibrate`")
    ap.add_argument("--json", default="out/sim_validate.json")
    ap.add_argument("--plot", default="out/sim_validate.png")


def run(args: argparse.Namespace) -> int:
    """Simulate the bench run's setting, print measured vs simulated per policy, write JSON and the plot."""
    bench = json.loads(Path(args.bench).read_text(encoding="utf-8"))
    policies = [p for p in _SIMULATED if p in bench["policies"]]
    sim = _simulate(bench["config"], policies, args.constants)
    rows, results = [], {}
    for p in policies:
        measured = bench["policies"][p]["mean_jct_s"]
        simulated = sim["policies"][p]["mean_jct_s"]
        err = (simulated - measured) / measured
        results[p] = {"measured_mean_jct_s": measured, "simulated_mean_jct_s": simulated, "rel_error": err,
                      "pass": abs(err) <= TARGET_REL_ERROR}
        rows.append([p, measured, simulated, f"{err:+.1%}", "PASS" if abs(err) <= TARGET_REL_ERROR else "FAIL"])
    print_table(["policy", "measured JCT s", "simulated JCT s", "error", f"within {TARGET_REL_ERROR:.0%}"], rows)
    write_json(args.json, {"results": results, "target_rel_error": TARGET_REL_ERROR, "bench": args.bench,
                           "constants": args.constants})
    bars = {f"{p} {kind}": results[p][f"{kind}_mean_jct_s"] for p in policies for kind in ("measured", "simulated")}
    print(f"wrote {plot_bars(args.plot, 'mean JCT: measured vs simulated', bars, 'seconds')}")
    return 0


def _simulate(cfg: dict, policies: list[str], constants: str) -> dict:
    from agent_engine.sim.calibrate import simulate_like_bench
    from agent_engine.sim.cost_model import CostConstants

    trace = "default" if str(cfg["trace"]).startswith("default") else cfg["trace"]
    return simulate_like_bench(
        trace, CostConstants.load(constants), policies, jps=cfg.get("jps"), jobs=cfg["jobs"],
        max_turns=cfg.get("max_turns"), token_scale=cfg["token_scale"], time_scale=cfg["time_scale"],
        seed=cfg["seed"], num_kv_blocks=cfg["num_kv_blocks"], max_num_seqs=cfg["max_num_seqs"],
        max_model_len=cfg["max_model_len"], block_size=cfg["block_size"],
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.sim_validate ...`` (same flags as ``agent-engine bench sim-validate``)."""
    ap = argparse.ArgumentParser(prog="agent-engine bench sim-validate", description=HELP)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
