"""``agent-engine estimator fit [--trace TRACE] -o FILE``: fit the learned tool-duration model offline.

Invariants: reads only the given trace (default: the shipped one), writes only ``-o FILE``; prints a
one-line held-out report (split by job) of the model's median against the per-tool mean, then the fit.
"""

from __future__ import annotations

import argparse

HELP = "tool-latency estimator: fit the learned model"
DEFAULT_QUANTILES = "0.1,0.25,0.5,0.75,0.9"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="estimator_cmd", required=True)
    fit = sub.add_parser("fit", help="fit the learned duration model from a trace")
    fit.add_argument("--trace", default=None, help="trace JSONL (default: the shipped agent trace)")
    fit.add_argument("-o", "--output", required=True, help="where to write the model (pickle)")
    fit.add_argument("--quantiles", default=DEFAULT_QUANTILES)
    fit.add_argument("--max-iter", type=int, default=80)
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--holdout", type=float, default=0.3, help="fraction of jobs held out for the report")
    fit.set_defaults(func=run_fit)


def run_fit(args: argparse.Namespace) -> int:
    from agent_engine.workloads.traces import load_trace
    from estimator import QuantileDurationModel, fit_learned_model, holdout_mae

    jobs = [(j.job_id, j.turns) for j in load_trace(args.trace)]
    quantiles = tuple(float(q) for q in args.quantiles.split(","))
    if args.holdout > 0:
        model = QuantileDurationModel(quantiles, args.max_iter, seed=args.seed)
        report = holdout_mae(jobs, args.holdout, model)
        print(f"held-out MAE ({int(report['test_turns'])} turns): learned median {report['learned_mae']:.4f} s, "
              f"per-tool mean {report['tool_mean_mae']:.4f} s")
    model = fit_learned_model(jobs, quantiles=quantiles, max_iter=args.max_iter, seed=args.seed)
    model.save(args.output)
    print(f"fitted {len(model.vocab)} tools, quantiles {list(quantiles)} -> {args.output}")
    return 0
