"""``agent-engine sim [run]`` (policies x loads on a simulated GPU) and ``agent-engine sim calibrate``.

``run`` prints a table of every point and writes ``{"policies": {name: <bench jct keys>}}`` for the
first load (the keys of ``bench jct``), the whole sweep under ``"sweep"`` and the FCFS-vs-policy ratio
at the load where FCFS's mean JCT is twice its unloaded value under ``"at_2x_unloaded"``, to
``--json`` and a plot to ``--plot`` (both default to ``out/sim_<gpu>_<model>.{json,png}``).
With ``--replicas N > 1`` it routes the jobs over N simulated replicas instead (``cluster_cli``).

Invariants: the engine flags are ``EngineConfig``'s own (``EngineConfig.add_arguments`` over
``ENGINE_FLAGS``), with GPU-scale defaults only where ``GPU_DEFAULTS`` lists them; they become one
``EngineConfig`` (``engine_options``), which builds the scheduler's limits as in the real engine; the
second tier's blocks come from the one conversion (``scheduler.tier_copy.tier_blocks``, in
``TIER_FORM``); the trace comes from the one resolver
(``agent_engine.workloads.traces.source.load_trace``; default: the shipped trace). Points run in
parallel processes (``--workers``); each is deterministic, so the output does not depend on it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agent_engine.config import EngineConfig
from agent_engine.json_types import JsonObject
from agent_engine.sim.cluster_cli import add_cluster_args, cmd_cluster
from agent_engine.sim.cost_model import CostConstants, CostModel, kv_pool_blocks
from agent_engine.sim.policy_label import POLICIES
from agent_engine.sim.sim_config import SimConfig, SweepSetup, sim_label
from agent_engine.sim.specs import GPUS, MODELS, get_gpu, get_model
from scheduler.tier_copy import tier_blocks

__all__ = ["ENGINE_FLAGS", "GPU_DEFAULTS", "HELP", "add_arguments", "build_cost_model", "default_output",
           "engine_options", "resolve_pool"]

HELP = "simulate policies at GPU scale on the real scheduler (run, calibrate)"
OUT_DIR = Path("out")
CPU_POOL_BLOCKS = 8192  # with --constants: the CPU engine's default pool (1 GiB of the default model's KV)
# The EngineConfig fields the sim exposes as flags (policy and TTL policy come from --policies; the
# second tier's form is ``TIER_FORM``).
ENGINE_FLAGS = ("block_size", "num_kv_blocks", "gpu_memory_utilization", "max_num_seqs",
                "max_num_batched_tokens", "max_model_len", "long_prefill_token_threshold",
                "max_pinned_fraction", "soft_pins", "soft_pin_grace", "pin_threshold", "kv_offload_bytes")
# Where the sim's defaults differ from EngineConfig's (a CPU engine's): a GPU server's 256 sequences
# and 8192-token steps, as vLLM runs them.
GPU_DEFAULTS: dict[str, object] = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
# The simulated tier holds a block in the pool's form: as many bytes as in the pool (no kv_offload_dtype).
TIER_FORM = "auto"


def engine_options(args: argparse.Namespace) -> EngineConfig:
    """The engine options of the parsed flags (``ENGINE_FLAGS``; every other field keeps its default).
    ``ValueError`` for a budget to measure: the simulator has no CPU model to time."""
    engine = EngineConfig.from_args(args, ENGINE_FLAGS)
    if engine.measures_token_budget:
        raise ValueError("the simulator takes a token budget in tokens (--max-num-batched-tokens >= 1); "
                         "0, measured on a loaded model, is for engines on CPU")
    return engine


def build_cost_model(args: argparse.Namespace) -> CostModel:
    """The cost model of ``--model`` on ``--gpu`` (datasheet constants) or ``--constants`` (a calibration)."""
    if args.constants:
        consts = CostConstants.load(args.constants)
    else:
        consts = CostConstants.from_gpu(get_gpu(args.gpu))
    return CostModel(get_model(args.model), consts, args.tp)


def resolve_pool(engine: EngineConfig, cost: CostModel, gpu: str | None) -> tuple[int, int]:
    """``(KV blocks, max_model_len)``: ``engine.num_kv_blocks``, else the GPU's pool by vLLM's
    arithmetic, else (calibrated CPU constants) ``CPU_POOL_BLOCKS``; the length is capped by the model
    and by the pool, then by ``engine.max_model_len``."""
    num_blocks = engine.num_kv_blocks
    if num_blocks is None:
        num_blocks = CPU_POOL_BLOCKS if gpu is None else kv_pool_blocks(
            cost.model, get_gpu(gpu), cost.tp, engine.gpu_memory_utilization, engine.block_size,
            engine.token_budget, engine.max_num_seqs)
    max_len = min(cost.model.max_position_embeddings, (num_blocks - 1) * engine.block_size)
    if engine.max_model_len:
        max_len = min(max_len, engine.max_model_len)
    return num_blocks, max_len


def default_output(args: argparse.Namespace, suffix: str) -> str:
    """``out/sim_<gpu or cpu>_<model>[_tpN].<suffix>``."""
    machine = "cpu" if args.constants else args.gpu
    tp = f"_tp{args.tp}" if args.tp > 1 else ""
    return str(OUT_DIR / f"sim_{machine}_{args.model}{tp}.{suffix}")


def _policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    for p in names:
        try:
            sim_label(p)
        except ValueError as e:
            raise SystemExit(str(e)) from None
    return names


def _print_results(sweep: dict[str, list[JsonObject]], at2: JsonObject) -> None:
    from agent_engine.reporting import print_table

    rows = [[name, p["jps"], p["mean_jct_s"], p["p90_jct_s"], p["jobs_per_min"], p["mean_queue_s"],
             p["prefix_hit_ratio"], p["preemptions"], p["wall_seconds"]]
            for name, pts in sweep.items() for p in pts]
    headers = ["policy", "jps", "mean JCT s", "p90 JCT s", "jobs/min", "queue s", "hit", "preempt", "wall s"]
    print_table(headers, rows)
    print(f"unloaded mean JCT {at2['unloaded_mean_jct_s']:.1f} s; FCFS reaches 2x at jps={at2['jps']}")
    for name in sweep:
        if name in at2:
            print(f"  {name}: mean JCT {at2[name]['mean_jct_s']:.1f} s, FCFS/{name} = "
                  f"{at2[name]['fcfs_over_policy']:.2f}x")


def _setup(args: argparse.Namespace) -> SweepSetup:
    """The sweep the flags describe: policies, loads, the engine and pool, the cost model, the jobs."""
    from agent_engine.workloads.traces.source import load_trace, trace_label

    policies = _policies(args.policies)
    loads = [float(x) for x in args.jps_list.split(",")] if args.jps_list else [args.jps]
    engine = engine_options(args)
    cost = build_cost_model(args)
    num_blocks, max_len = resolve_pool(engine, cost, None if args.constants else args.gpu)
    tier = tier_blocks(engine.offload_bytes, cost.block_shape(engine.block_size), TIER_FORM)
    base = SimConfig(engine, num_blocks, max_len, max_jobs=args.jobs, max_turns=args.max_turns,
                     token_scale=args.token_scale, time_scale=args.time_scale, seed=args.seed,
                     tier_blocks=tier)
    jobs = list(load_trace(args.trace, max_jobs=args.jobs, seed=args.seed))
    return SweepSetup(policies, loads, base, cost, jobs, trace_label(args.trace))


def _cmd_run(args: argparse.Namespace) -> int:
    run = _setup(args)
    if args.replicas > 1:
        machine = "cpu" if args.constants else args.gpu
        out = args.json or str(OUT_DIR / f"sim_cluster_{machine}_{args.model}_x{args.replicas}.json")
        return cmd_cluster(args, run, out)
    from agent_engine.reporting import write_json
    from agent_engine.sim.sweep import plot, ratio_at_2x_unloaded, run_sweep

    num_blocks, max_len = run.base.num_blocks, run.base.max_model_len
    print(f"sim: {args.model} on {args.constants or args.gpu} tp={args.tp}: {num_blocks} KV blocks "
          f"({(num_blocks - 1) * args.block_size:,} tokens), max_model_len {max_len}; "
          f"{len(run.jobs)} jobs of {run.trace}")
    res = run_sweep(run.jobs, run.cost, run.base, run.policies, run.loads, workers=args.workers,
                    progress=not args.no_progress)
    sweep, unloaded = res["sweep"], res["unloaded"]
    at2 = ratio_at_2x_unloaded(sweep, unloaded["mean_jct_s"])
    _print_results(sweep, at2)
    setup = {k: v for k, v in vars(args).items() if k != "func"}
    payload = {
        "policies": {name: {k: v for k, v in pts[0].items() if k != "jps"} for name, pts in sweep.items()},
        "jps": run.loads[0], "sweep": sweep, "unloaded": unloaded, "at_2x_unloaded": at2,
        "setup": setup | {"num_kv_blocks": num_blocks, "max_model_len": max_len, "trace": run.trace},
    }
    write_json(args.json or default_output(args, "json"), payload)
    plot(sweep, unloaded["mean_jct_s"], f"{args.model} / {args.constants or args.gpu} tp={args.tp}, "
         f"{len(run.jobs)} jobs", args.plot or default_output(args, "png"))
    return 0


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", default=None,
                   help="trace JSONL, synth:PROFILE or default (default: the shipped trace)")
    p.add_argument("--model", default="llama-3.1-8b", help=f"one of {sorted(MODELS)}")
    p.add_argument("--gpu", default="h100", help=f"one of {sorted(GPUS)}")
    p.add_argument("--constants", default=None, help="calibration JSON (CPU constants) instead of --gpu")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--policies", default="fcfs,continuum",
                   help=f"comma list of {', '.join(POLICIES)}; a label ending in +tier gets a second KV "
                        "tier of --kv-offload-bytes per GPU, one ending in +pool a pool grown by those bytes "
                        "instead (the equal-memory reference)")
    p.add_argument("--jps", type=float, default=0.05)
    p.add_argument("--jps-list", default=None, help="comma-separated loads (overrides --jps)")
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--token-scale", type=float, default=1.0)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    EngineConfig.add_arguments(p, ENGINE_FLAGS, GPU_DEFAULTS, title="engine options (see agent-engine serve)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", default=None, help="results JSON (default: out/sim_<gpu>_<model>.json)")
    p.add_argument("--plot", default=None, help="JCT-vs-load PNG (default: out/sim_<gpu>_<model>.png)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_cluster_args(p)


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
