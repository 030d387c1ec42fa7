"""``agent-engine sim [run]`` (policies x loads on a simulated GPU) and ``agent-engine sim calibrate``.

``run`` writes ``{"policies": {name: <bench jct keys>}}`` for the first load (the keys of
``bench jct``), the whole sweep under ``"sweep"`` and the FCFS-vs-policy ratio at the load where
FCFS's mean JCT is twice its unloaded value under ``"at_2x_unloaded"``. Points run in parallel
processes (``--workers``); each point is deterministic, so the output does not depend on it.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from agent_engine.sim.cost_model import CostConstants, CostModel, kv_pool_blocks
from agent_engine.sim.simulator import POLICIES, SimConfig, simulate
from agent_engine.sim.specs import GPUS, MODELS, get_gpu, get_model

__all__ = ["add_arguments", "build_cost_model", "main", "ratio_at_2x_unloaded", "run_sweep"]

DEFAULT_TRACE = "/work/shared/traces/mini_swe_agent_deepseek.jsonl"
UNLOADED_JPS = 1e-4  # jobs ~3 h apart: every job runs alone


def build_cost_model(args: argparse.Namespace) -> tuple[CostModel, int, int]:
    """(cost model, KV pool blocks, max_model_len) for the model/GPU/TP (or calibration file) in ``args``."""
    model = get_model(args.model)
    if args.constants:
        consts = CostConstants.load(args.constants)
        num_blocks = args.num_kv_blocks or 8192
    else:
        gpu = get_gpu(args.gpu)
        consts = CostConstants.from_gpu(gpu)
        num_blocks = args.num_kv_blocks or kv_pool_blocks(
            model, gpu, args.tp, args.gpu_memory_utilization, args.block_size, args.max_num_batched_tokens,
            args.max_num_seqs,
        )
    max_len = min(model.max_position_embeddings, (num_blocks - 1) * args.block_size)
    if args.max_model_len:
        max_len = min(max_len, args.max_model_len)
    return CostModel(model, consts, args.tp), num_blocks, max_len


def _point(task: tuple[str, dict[str, Any], str, float | None]) -> tuple[str, float | None, dict[str, Any]]:
    from agent_engine.workloads.traces.format import read_jobs

    policy, ns, trace, jps = task
    args = argparse.Namespace(**ns)
    cost, num_blocks, max_len = build_cost_model(args)
    cfg = SimConfig(
        policy=policy, num_blocks=num_blocks, max_model_len=max_len, block_size=args.block_size,
        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
        max_pinned_fraction=args.max_pinned_fraction, soft_pins=args.soft_pins,
        soft_pin_grace=args.soft_pin_grace, pin_threshold=args.pin_threshold,
        jps=jps,
        max_jobs=args.jobs, max_turns=args.max_turns, token_scale=args.token_scale, time_scale=args.time_scale,
        seed=args.seed,
    )
    return policy, jps, simulate(read_jobs(trace), cost, cfg).summary()


def run_sweep(args: argparse.Namespace, policies: Sequence[str], loads: Sequence[float]) -> dict[str, Any]:
    """Every (policy, load) point plus FCFS unloaded; returns ``{"sweep": {policy: [point...]}, ...}``."""
    ns = vars(args).copy()
    ns.pop("func", None)
    tasks = [(p, ns, args.trace, jps) for p in policies for jps in loads]
    tasks.append(("fcfs", ns, args.trace, UNLOADED_JPS))
    tasks.sort(key=lambda t: -(t[3] or 0.0))  # heavy points first: better packing over workers
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as ex:
        results = list(ex.map(_point, tasks))
    sweep: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    unloaded: dict[str, Any] = {}
    for policy, jps, summ in results:
        if jps == UNLOADED_JPS:
            unloaded = summ
        else:
            sweep[policy].append({"jps": jps, **summ})
    for pts in sweep.values():
        pts.sort(key=lambda d: d["jps"])
    return {"sweep": sweep, "unloaded": unloaded}


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y0
    return math.nan


def ratio_at_2x_unloaded(sweep: dict[str, list[dict[str, Any]]], unloaded_jct: float) -> dict[str, Any]:
    """The load where FCFS's mean JCT first reaches 2x unloaded (linear interpolation) and each policy's
    JCT there, with FCFS / policy ratios; ``jps`` is None when the sweep never reaches 2x."""
    f = sweep.get("fcfs", [])
    target = 2.0 * unloaded_jct
    xs = [p["jps"] for p in f]
    ys = [p["mean_jct_s"] for p in f]
    jps = None
    prev = (0.0, unloaded_jct)
    for x, y in zip(xs, ys, strict=True):
        if y >= target:
            x0, y0 = prev
            jps = x0 + (x - x0) * (target - y0) / (y - y0) if y > y0 else x
            break
        prev = (x, y)
    out: dict[str, Any] = {"unloaded_mean_jct_s": unloaded_jct, "target_jct_s": target, "jps": jps}
    if jps is None:
        return out
    for name, pts in sweep.items():
        px = [0.0] + [p["jps"] for p in pts]
        py = [unloaded_jct] + [p["mean_jct_s"] for p in pts]
        jct = _interp(px, py, jps)
        out[name] = {"mean_jct_s": jct, "fcfs_over_policy": target / jct if jct else None}
    return out


def plot(sweep: dict[str, list[dict[str, Any]]], unloaded_jct: float, title: str, path: str) -> None:
    """Mean JCT vs jobs/s per policy (matplotlib Agg), with the 2x-unloaded line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in sweep.items():
        ax.plot([p["jps"] for p in pts], [p["mean_jct_s"] for p in pts], marker="o", label=name)
    ax.axhline(2 * unloaded_jct, color="grey", ls="--", lw=1, label="2x unloaded (FCFS)")
    ax.set_xlabel("load (jobs / s, Poisson)")
    ax.set_ylabel("mean JCT (s)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


def _cmd_run(args: argparse.Namespace) -> int:
    from agent_engine.reporting import print_table, write_json

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        if p not in POLICIES:
            raise SystemExit(f"unknown policy {p!r}; known: {POLICIES}")
    loads = [float(x) for x in args.jps_list.split(",")] if args.jps_list else [args.jps]
    cost, num_blocks, max_len = build_cost_model(args)
    print(f"sim: {args.model} on {args.constants or args.gpu} tp={args.tp}: {num_blocks} KV blocks "
          f"({(num_blocks - 1) * args.block_size:,} tokens), max_model_len {max_len}")
    res = run_sweep(args, policies, loads)
    sweep, unloaded = res["sweep"], res["unloaded"]
    rows = [[name, p["jps"], p["mean_jct_s"], p["p90_jct_s"], p["jobs_per_min"], p["mean_queue_s"],
             p["prefix_hit_ratio"], p["preemptions"], p["wall_seconds"]]
            for name, pts in sweep.items() for p in pts]
    print_table(["policy", "jps", "mean JCT s", "p90 JCT s", "jobs/min", "queue s", "hit", "preempt", "wall s"],
                rows)
    at2 = ratio_at_2x_unloaded(sweep, unloaded["mean_jct_s"])
    print(f"unloaded mean JCT {unloaded['mean_jct_s']:.1f} s; FCFS reaches 2x at jps={at2['jps']}")
    for name in policies:
        if name in at2:
            print(f"  {name}: mean JCT {at2[name]['mean_jct_s']:.1f} s, FCFS/{name} = "
                  f"{at2[name]['fcfs_over_policy']:.2f}x")
    payload = {
        "policies": {name: {k: v for k, v in pts[0].items() if k != "jps"} for name, pts in sweep.items()},
        "jps": loads[0], "sweep": sweep, "unloaded": unloaded, "at_2x_unloaded": at2,
        "setup": {k: v for k, v in vars(args).items() if k != "func"} | {"num_kv_blocks": num_blocks,
                                                                          "max_model_len": max_len},
    }
    write_json(args.json, payload)
    if args.plot:
        plot(sweep, unloaded["mean_jct_s"], f"{args.model} / {args.constants or args.gpu} tp={args.tp}, "
             f"{args.jobs} jobs", args.plot)
    return 0


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", default=DEFAULT_TRACE)
    p.add_argument("--model", default="llama-3.1-8b", help=f"one of {sorted(MODELS)}")
    p.add_argument("--gpu", default="h100", help=f"one of {sorted(GPUS)}")
    p.add_argument("--constants", default=None, help="calibration JSON (CPU constants) instead of --gpu")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--policies", default="fcfs,continuum")
    p.add_argument("--jps", type=float, default=0.05)
    p.add_argument("--jps-list", default=None, help="comma-separated loads (overrides --jps)")
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--token-scale", type=float, default=1.0)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-kv-blocks", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-pinned-fraction", type=float, default=0.5)
    p.add_argument("--soft-pins", action=argparse.BooleanOptionalAction, default=True,
                   help="CONTINUUM: hold the part of a pin past the cap as a soft tail (default: on)")
    p.add_argument("--soft-pin-grace", type=float, default=2.0,
                   help="CONTINUUM with soft pins: seconds an expired pin stays soft (default 2)")
    p.add_argument("--pin-threshold", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None)


HELP = "simulate policies at GPU scale on the real scheduler (run, calibrate)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``sim`` runs policies x loads (``run`` is the default); ``sim calibrate`` fits CPU constants."""
    from agent_engine.sim.calibrate import add_calibrate_args, cmd_calibrate

    _add_run_args(parser)
    parser.set_defaults(func=_cmd_run)
    sub = parser.add_subparsers(dest="sim_command")
    run = sub.add_parser("run", help="policies x loads (default)")
    _add_run_args(run)
    run.set_defaults(func=_cmd_run)
    cal = sub.add_parser("calibrate", help="fit the CPU cost constants on the real engine")
    add_calibrate_args(cal)
    cal.set_defaults(func=cmd_calibrate)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m agent_engine.sim.cli [run|calibrate] ...``."""
    ap = argparse.ArgumentParser(prog="agent-engine sim")
    add_arguments(ap)
    args = ap.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
