"""Validate the simulator against a measured ``bench jct`` run: same trace, jobs, pool and policies,
simulated with CPU constants from ``agent-engine sim calibrate``.

    python -m benchmarks.sim_validate --bench out/jct_shared.json --constants out/sim_cpu_constants.json

Issue 6's target: simulated mean JCT within 20% of the measured one for every policy.
"""

from __future__ import annotations

import argparse
import json

from agent_engine.reporting import print_table, write_json

TARGET_REL_ERROR = 0.20
_SIMULATED = ("fcfs", "continuum", "continuum-fixed")


def main(argv: list[str] | None = None) -> dict:
    from agent_engine.sim.calibrate import simulate_like_bench
    from agent_engine.sim.cost_model import CostConstants

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="JSON written by `bench jct`")
    ap.add_argument("--constants", required=True, help="JSON written by `sim calibrate`")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    bench = json.load(open(args.bench, encoding="utf-8"))
    cfg = bench["config"]
    policies = [p for p in _SIMULATED if p in bench["policies"]]
    sim = simulate_like_bench(
        cfg["trace"], CostConstants.load(args.constants), policies, jps=cfg.get("jps"), jobs=cfg["jobs"],
        max_turns=cfg.get("max_turns"), token_scale=cfg["token_scale"], time_scale=cfg["time_scale"],
        seed=cfg["seed"], num_kv_blocks=cfg["num_kv_blocks"], max_num_seqs=cfg["max_num_seqs"],
        max_model_len=cfg["max_model_len"], block_size=cfg["block_size"],
    )
    rows, results = [], {}
    for p in policies:
        measured = bench["policies"][p]["mean_jct_s"]
        simulated = sim["policies"][p]["mean_jct_s"]
        err = (simulated - measured) / measured
        results[p] = {"measured_mean_jct_s": measured, "simulated_mean_jct_s": simulated, "rel_error": err,
                      "pass": abs(err) <= TARGET_REL_ERROR}
        rows.append([p, measured, simulated, f"{err:+.1%}", "PASS" if abs(err) <= TARGET_REL_ERROR else "FAIL"])
    print_table(["policy", "measured JCT s", "simulated JCT s", "error", f"within {TARGET_REL_ERROR:.0%}"], rows)
    payload = {"results": results, "target_rel_error": TARGET_REL_ERROR, "bench": args.bench,
               "constants": args.constants}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
