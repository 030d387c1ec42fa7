"""``agent-engine sim calibrate``: time the real engine on this CPU and fit the cost model's constants.

Each batch shape ``(decode requests D, their context C, prefill tokens P)`` is produced on a real
``LLMEngine`` (embedded default model, FCFS): D requests of C fresh tokens are prefilled (those steps
are samples too), then decode-only steps, then steps that add one P-token prompt to the D decodes.
Every step's scheduled chunks (captured at the runner) and its wall time (``step_listeners``) form a
sample. The fit is the ``sum`` form of ``cost_model`` (``combine="sum"``: a CPU does not overlap
memory and compute), linear in ``(overhead, per request, 1/bandwidth, 1/GEMM rate, 1/attention
rate)``, solved by non-negative least squares on relative errors.

Invariants: torch and the engine are imported only inside ``measure``; ``fit`` and ``errors`` are pure
numpy; every fitted rate is positive (a zero coefficient becomes an effectively infinite rate).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agent_engine.sim.cost_model import Chunk, CostConstants, CostModel
from agent_engine.sim.specs import ModelSpec, get_model
from agent_engine.workloads.traces.format import TraceJob

__all__ = ["DEFAULT_SHAPES", "SMALL_SHAPES", "errors", "fit", "measure", "simulate_like_bench"]

Sample = tuple[list[Chunk], float]
DEFAULT_SHAPES = [(d, c, p) for d in (1, 4, 16) for c in (64, 512, 1536) for p in (0, 256, 1024)]
SMALL_SHAPES = [(1, 64, 0), (4, 256, 128), (8, 512, 0), (2, 128, 512)]
_HUGE = 1e30


# Issue 6: the calibrated cost model predicts the real engine's step times within 15% median error.
TARGET_MEDIAN_ERROR = 0.15


def measure(shapes: Sequence[tuple[int, int, int]], decode_steps: int = 3, mixed_steps: int = 2,
            seed: int = 0, engine_kwargs: dict[str, Any] | None = None) -> list[Sample]:
    """Samples ``(chunks, seconds)`` of real engine steps over ``shapes`` (one warm-up step dropped)."""
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.sim.cost_model import chunks_of
    from scheduler import SamplingParams

    kw = {"device": "cpu", "policy": "fcfs", "profile_reload_cost": False, "max_num_seqs": 64,
          "max_num_batched_tokens": 2048, **(engine_kwargs or {})}
    eng = LLMEngine(EngineConfig(**kw))
    rng = np.random.default_rng(seed)
    vocab = eng.vocab_size
    chunks: list[list[Chunk]] = []
    times: list[float] = []
    orig = eng.runner.execute

    def execute(out: Any) -> Any:
        chunks.append(chunks_of(out.scheduled))
        return orig(out)

    eng.runner.execute = execute  # type: ignore[method-assign]
    eng.step_listeners.append(lambda info: times.append(info["step_seconds"]))
    counter = 0

    def add(n: int, max_tokens: int) -> str:
        nonlocal counter
        counter += 1
        rid = f"cal{counter}"
        ids = rng.integers(16, vocab, n).tolist()
        eng.add_request(rid, ids, SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True))
        return rid

    for d, c, p in shapes:
        span = decode_steps + 2 * mixed_steps + 4
        ids = [add(c, span) for _ in range(d)]
        while any(not eng.scheduler.requests[r].output_token_ids for r in ids if r in eng.scheduler.requests):
            eng.step()
        for _ in range(decode_steps):
            eng.step()
        for _ in range(mixed_steps if p else 0):
            pid = add(p, 1)
            eng.step()
            eng.abort([pid])
        eng.abort(ids)
    eng.close()
    if len(chunks) != len(times):
        raise RuntimeError(f"captured {len(chunks)} batches but {len(times)} step times")
    return list(zip(chunks, times, strict=True))[1:]


def fit(model: ModelSpec, samples: Sequence[Sample]) -> CostConstants:
    """CPU constants (``combine="sum"``) minimising squared relative error, coefficients >= 0."""
    from scipy.optimize import nnls

    base = CostModel(model, CostConstants(1.0, 1.0, 1.0, 0.0, 0.0, combine="sum"))
    rows = np.array([base.features(ch).as_row() for ch, _ in samples], float)
    y = np.array([t for _, t in samples], float)
    scale = np.abs(rows).max(axis=0)
    scale[scale == 0] = 1.0
    a = rows / scale / y[:, None]
    coef, _ = nnls(a, np.ones_like(y))
    coef = coef / scale

    def rate(k: float) -> float:
        return 1.0 / k if k > 0 else _HUGE

    return CostConstants(
        flops_per_s=rate(coef[3]), attn_flops_per_s=rate(coef[4]), bytes_per_s=rate(coef[2]),
        step_overhead_s=float(coef[0]), per_request_s=float(coef[1]), combine="sum",
        source=f"calibrated on this CPU ({model.name}, {len(samples)} steps)",
    )


def errors(cost: CostModel, samples: Sequence[Sample]) -> list[float]:
    """Relative errors ``(predicted - measured) / measured`` per sample."""
    return [(cost.step_time(ch) - t) / t for ch, t in samples]


def simulate_like_bench(
    trace: str | Sequence[TraceJob], constants: CostConstants, policies: Sequence[str] = ("fcfs", "continuum"),
    jps: float | None = None, jobs: int = 8, max_turns: int | None = None, token_scale: float = 1.0,
    time_scale: float = 1.0, seed: int = 0, num_kv_blocks: int = 8192, max_num_seqs: int = 64,
    max_num_batched_tokens: int = 2048, max_model_len: int = 4096, block_size: int = 16,
    max_pinned_fraction: float = 0.5, first_job: int = 0, soft_pins: bool = True,
) -> dict[str, Any]:
    """What ``bench jct`` would report for the CPU engine (its defaults: default model, 1 GiB KV =
    8192 blocks, 64 seqs, 2048-token budget), simulated with calibrated ``constants``.

    ``trace`` is a path or already-read jobs; the replay takes ``jobs`` jobs from ``first_job`` on.
    Same keys as ``bench jct``: ``{"policies": {name: {"mean_jct_s", ...}}}``.
    """
    from agent_engine.sim.simulator import SimConfig, simulate
    from agent_engine.workloads.traces.format import read_jobs

    cost = CostModel(get_model("default"), constants)
    tj = (read_jobs(trace) if isinstance(trace, str) else list(trace))[first_job:]
    out: dict[str, Any] = {}
    for pol in policies:
        cfg = SimConfig(
            policy=pol, num_blocks=num_kv_blocks, max_model_len=max_model_len, block_size=block_size,
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, jps=jps, max_jobs=jobs,
            max_turns=max_turns, token_scale=token_scale, time_scale=time_scale, seed=seed,
            max_pinned_fraction=max_pinned_fraction, soft_pins=soft_pins,
        )
        out[pol] = simulate(tj, cost, cfg).summary()
    return {"policies": out}


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", choices=("default", "small"), default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="sim_cpu_constants.json", help="calibration JSON to write")
    p.add_argument("--holdout", type=float, default=0.3, help="share of samples kept out of the fit")


def cmd_calibrate(args: argparse.Namespace) -> int:
    from agent_engine.reporting import machine_info

    shapes = DEFAULT_SHAPES if args.shapes == "default" else SMALL_SHAPES
    t0 = time.perf_counter()
    samples = measure(shapes, seed=args.seed)
    took = time.perf_counter() - t0
    model = get_model("default")
    rng = np.random.default_rng(args.seed)
    test_mask = rng.random(len(samples)) < args.holdout
    train = [s for s, m in zip(samples, test_mask, strict=True) if not m]
    test = [s for s, m in zip(samples, test_mask, strict=True) if m]
    consts = fit(model, train)
    cost = CostModel(model, consts)
    med_train = statistics.median(abs(e) for e in errors(cost, train))
    med_test = statistics.median(abs(e) for e in errors(cost, test)) if test else None
    consts = fit(model, samples)  # the saved constants use every sample
    med_all = statistics.median(abs(e) for e in errors(CostModel(model, consts), samples))
    report = {
        "constants": consts.to_dict(), "model": model.name, "shapes": shapes, "samples": len(samples),
        "median_abs_rel_error": med_all, "median_abs_rel_error_train": med_train,
        "median_abs_rel_error_holdout": med_test, "measure_seconds": took, "machine": machine_info(),
        "target_median_error": TARGET_MEDIAN_ERROR,
        "pass": bool((med_test if med_test is not None else med_all) <= TARGET_MEDIAN_ERROR),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({k: v for k, v in report.items() if k != "shapes"}, indent=2))
    judged = med_test if med_test is not None else med_all
    print(f"median |step-time error| {judged:.1%} (target <= {TARGET_MEDIAN_ERROR:.0%}: "
          f"{'PASS' if report['pass'] else 'FAIL'})")
    print(f"wrote {args.out}")
    return 0
