"""``agent-engine estimator fit TRACE.jsonl -o FILE``: fit the learned duration model offline.

Invariants: reads only the given trace, writes only ``-o FILE``; prints a one-line summary with the
held-out (split by job) MAE of the model's median vs the per-tool mean.
"""

from __future__ import annotations

import argparse
import zlib
from collections.abc import Sequence

import numpy as np

from estimator.traces import read_trace
from estimator.ttl_learned import DEFAULT_QUANTILES, QuantileDurationModel, trace_dataset

__all__ = ["fit_main", "holdout_mae", "is_holdout", "register"]


def _add_fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace JSONL (one job a line)")
    p.add_argument("-o", "--output", required=True, help="where to write the model (pickle)")
    p.add_argument("--quantiles", default=",".join(str(q) for q in DEFAULT_QUANTILES))
    p.add_argument("--max-iter", type=int, default=80)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--holdout", type=float, default=0.3, help="fraction of jobs held out for the report")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``estimator fit`` to the top-level ``agent-engine`` parser (dispatch via ``args.func(args)``)."""
    est = subparsers.add_parser("estimator", help="tool-latency estimator")
    sub = est.add_subparsers(dest="estimator_cmd", required=True)
    fit = sub.add_parser("fit", help="fit the learned duration model from a trace")
    _add_fit_args(fit)
    fit.set_defaults(func=_run_fit)


def is_holdout(job_id: str, fraction: float) -> bool:
    """Deterministic split by job id."""
    return (zlib.crc32(job_id.encode()) % 1000) < fraction * 1000


def holdout_mae(
    trace_path: str, fraction: float = 0.3, model: QuantileDurationModel | None = None
) -> dict[str, float]:
    """Fit on the non-held-out jobs; MAE on held-out turns of the model's median and of the per-tool mean."""
    tools, x, y, jobs = trace_dataset(read_trace(trace_path))
    test = np.array([is_holdout(j, fraction) for j in jobs])
    train_tools = [t for t, h in zip(tools, test, strict=True) if not h]
    test_tools = [t for t, h in zip(tools, test, strict=True) if h]
    model = (model or QuantileDurationModel()).fit(train_tools, x[~test], y[~test])
    pred = model.predict_median(test_tools, x[test])
    y_train, y_test = y[~test], y[test]
    overall = float(y_train.mean())
    means = {t: float(y_train[[u == t for u in train_tools]].mean()) for t in set(train_tools)}
    baseline = np.array([means.get(t, overall) for t in test_tools])
    return {
        "train_turns": float(len(y_train)),
        "test_turns": float(len(y_test)),
        "learned_mae": float(np.abs(pred - y_test).mean()),
        "tool_mean_mae": float(np.abs(baseline - y_test).mean()),
    }


def _run_fit(args: argparse.Namespace) -> int:
    quantiles = tuple(float(q) for q in args.quantiles.split(","))
    if args.holdout > 0:
        report = holdout_mae(args.trace, args.holdout, QuantileDurationModel(quantiles, args.max_iter, seed=args.seed))
        print(f"held-out MAE ({int(report['test_turns'])} turns): learned median {report['learned_mae']:.4f} s, "
              f"per-tool mean {report['tool_mean_mae']:.4f} s")
    tools, x, y, _ = trace_dataset(read_trace(args.trace))
    model = QuantileDurationModel(quantiles, args.max_iter, seed=args.seed).fit(tools, x, y)
    model.save(args.output)
    print(f"fitted on {len(y)} turns, {len(model.vocab)} tools, quantiles {list(quantiles)} -> {args.output}")
    return 0


def fit_main(argv: Sequence[str] | None = None) -> int:
    """``estimator fit`` as a standalone entry point: ``fit_main(["TRACE.jsonl", "-o", "model.pkl"])``."""
    parser = argparse.ArgumentParser(prog="agent-engine estimator fit")
    _add_fit_args(parser)
    return _run_fit(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(fit_main())
