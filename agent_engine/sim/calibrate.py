"""``agent-engine sim calibrate``: time the real engine on this CPU and fit the cost model's constants.

Each batch shape ``(decode requests D, their context C, prefill tokens P)`` is produced on a real
``LLMEngine`` (embedded default model, FCFS): D requests of C fresh tokens are prefilled (those steps
are samples too), then decode-only steps, then steps that add one P-token prompt to the D decodes.
Every step's scheduled chunks (captured at the runner) and its wall time (``step_listeners``) form a
sample. The fit is the ``sum`` form of ``cost_model`` (``combine="sum"``: a CPU does not overlap
memory and compute), linear in ``(overhead, per request, 1/bandwidth, 1/GEMM rate, 1/attention
rate)``, solved by non-negative least squares on relative errors.

``simulate_like_bench`` replays ``bench jct``'s setting on the CPU engine in the simulator with
calibrated constants (the benchmarks' ``sim_validate`` and ``sim_slices`` call it).

Invariants: torch and the engine are imported only inside ``measure``; ``fit`` and ``errors`` are pure
numpy; every fitted rate is positive (a zero coefficient becomes an effectively infinite rate).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agent_engine.config import EngineConfig
from agent_engine.json_types import JsonObject
from agent_engine.sim.cost_model import Chunk, CostConstants, CostModel, chunks_of
from agent_engine.sim.policy_label import engine_for_policy
from agent_engine.sim.sim_config import SimConfig
from agent_engine.sim.specs import ModelSpec, get_model
from agent_engine.workloads.traces.format import TraceJob
from scheduler import SamplingParams

__all__ = ["DEFAULT_SHAPES", "SMALL_SHAPES", "TARGET_MEDIAN_ERROR", "errors", "fit", "measure",
           "simulate_like_bench"]

Sample = tuple[list[Chunk], float]
Shape = tuple[int, int, int]
DEFAULT_SHAPES: list[Shape] = [(d, c, p) for d in (1, 4, 16) for c in (64, 512, 1536) for p in (0, 256, 1024)]
SMALL_SHAPES: list[Shape] = [(1, 64, 0), (4, 256, 128), (8, 512, 0), (2, 128, 512)]
DEFAULT_OUT = "out/sim_cpu_constants.json"
_HUGE = 1e30

# The calibration's target: the fitted cost model predicts the real engine's step times within 15%
# median relative error (on held-out steps).
TARGET_MEDIAN_ERROR = 0.15


class _Bench:
    """A real CPU engine whose every step is recorded as ``(scheduled chunks, wall seconds)``."""

    def __init__(self, seed: int, engine_kwargs: JsonObject | None) -> None:
        from agent_engine.engine.llm_engine import LLMEngine

        kw = {"device": "cpu", "policy": "fcfs", "profile_reload_cost": False, "max_num_seqs": 64,
              "max_num_batched_tokens": 2048, **(engine_kwargs or {})}
        self.eng = LLMEngine(EngineConfig(**kw))
        self.rng = np.random.default_rng(seed)
        self.chunks: list[list[Chunk]] = []
        self.times: list[float] = []
        self.counter = 0
        run = self.eng.runner.execute

        def execute(out: Any) -> Any:
            self.chunks.append(chunks_of(out.scheduled))
            return run(out)

        self.eng.runner.execute = execute  # type: ignore[method-assign]
        self.eng.step_listeners.append(lambda info: self.times.append(info["step_seconds"]))

    def add(self, n: int, max_tokens: int) -> str:
        """Add a request of ``n`` random prompt tokens; returns its id."""
        self.counter += 1
        rid = f"cal{self.counter}"
        ids = self.rng.integers(16, self.eng.vocab_size, n).tolist()
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        self.eng.add_request(self.eng.make_request(rid, ids, params))
        return rid

    def run_shape(self, shape: Shape, decode_steps: int, mixed_steps: int) -> None:
        """Prefill D requests of C tokens, decode them, then add P-token prompts beside the decodes."""
        d, c, p = shape
        span = decode_steps + 2 * mixed_steps + 4
        ids = [self.add(c, span) for _ in range(d)]
        while not self._all_decoding(ids):
            self.eng.step()
        for _ in range(decode_steps):
            self.eng.step()
        for _ in range(mixed_steps if p else 0):
            pid = self.add(p, 1)
            self.eng.step()
            self.eng.abort([pid])
        self.eng.abort(ids)

    def _all_decoding(self, ids: list[str]) -> bool:
        """True when every request of ``ids`` still in the scheduler has its first output token."""
        requests = self.eng.scheduler.requests
        return all(requests[r].output_token_ids for r in ids if r in requests)

    def samples(self) -> list[Sample]:
        """Every recorded step but the first (warm-up)."""
        self.eng.close()
        if len(self.chunks) != len(self.times):
            raise RuntimeError(f"captured {len(self.chunks)} batches but {len(self.times)} step times")
        return list(zip(self.chunks, self.times, strict=True))[1:]


def measure(shapes: Sequence[Shape], decode_steps: int = 3, mixed_steps: int = 2, seed: int = 0,
            engine_kwargs: JsonObject | None = None, progress: bool = False) -> list[Sample]:
    """Samples ``(chunks, seconds)`` of real engine steps over ``shapes`` (one warm-up step dropped)."""
    bench = _Bench(seed, engine_kwargs)
    for shape in tqdm(shapes, desc="calibration shapes", unit="shape", disable=not progress):
        bench.run_shape(shape, decode_steps, mixed_steps)
    return bench.samples()


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
    trace: str | Sequence[TraceJob], constants: CostConstants,
    policies: Sequence[str] = ("fcfs", "continuum"),
    jps: float | None = None, jobs: int = 8, max_turns: int | None = None, token_scale: float = 1.0,
    time_scale: float = 1.0, seed: int = 0, num_kv_blocks: int = 8192, max_num_seqs: int = 64,
    max_num_batched_tokens: int = 2048, max_model_len: int = 4096, block_size: int = 16,
    max_pinned_fraction: float = 0.5, first_job: int = 0, soft_pins: bool = True,
) -> JsonObject:
    """What ``bench jct`` would report for the CPU engine (its defaults: default model, 1 GiB KV =
    8192 blocks, 64 seqs, 2048-token budget), simulated with calibrated ``constants``.

    ``trace`` is a trace spec (``load_trace``: a path, ``synth:PROFILE`` drawn with ``seed``, or
    ``default``) or already-read jobs; the replay takes ``jobs`` jobs from ``first_job`` on. ``policies``
    are ``agent_engine.sim.policy_label.POLICIES`` labels. Same keys as ``bench jct``:
    ``{"policies": {name: {"mean_jct_s", ...}}}``.
    """
    from agent_engine.sim.simulator import simulate
    from agent_engine.workloads.traces.source import load_trace

    cost = CostModel(get_model("default"), constants)
    picked = load_trace(trace, first_job + jobs, seed) if isinstance(trace, str) else list(trace)
    engine = EngineConfig(block_size=block_size, max_num_seqs=max_num_seqs,
                          max_num_batched_tokens=max_num_batched_tokens,
                          max_pinned_fraction=max_pinned_fraction, soft_pins=soft_pins)
    base = SimConfig(engine, num_kv_blocks, max_model_len, jps=jps, max_jobs=jobs, max_turns=max_turns,
                     token_scale=token_scale, time_scale=time_scale, seed=seed)
    out = {}
    for pol in policies:
        cfg = dataclasses.replace(base, engine=engine_for_policy(pol, engine))
        out[pol] = simulate(picked[first_job:], cost, cfg).summary()
    return {"policies": out}


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    """The ``sim calibrate`` flags."""
    p.add_argument("--shapes", choices=("default", "small"), default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=DEFAULT_OUT, help=f"calibration JSON to write (default: {DEFAULT_OUT})")
    p.add_argument("--holdout", type=float, default=0.3, help="share of samples kept out of the fit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _split(samples: list[Sample], holdout: float, seed: int) -> tuple[list[Sample], list[Sample]]:
    """``(train, test)``: each sample is held out with probability ``holdout`` (seeded)."""
    test_mask = np.random.default_rng(seed).random(len(samples)) < holdout
    train = [s for s, m in zip(samples, test_mask, strict=True) if not m]
    test = [s for s, m in zip(samples, test_mask, strict=True) if m]
    return train, test


def _median_error(model: ModelSpec, consts: CostConstants, samples: Sequence[Sample]) -> float:
    return statistics.median(abs(e) for e in errors(CostModel(model, consts), samples))


def _report(samples: list[Sample], holdout: float, seed: int) -> tuple[float, JsonObject]:
    """``(judged error, report)``: fit on the training share and judge on the held-out share (on all
    samples when none is held out); the saved constants use every sample."""
    from agent_engine.reporting import machine_info

    model = get_model("default")
    train, test = _split(samples, holdout, seed)
    fitted = fit(model, train)
    med_test = _median_error(model, fitted, test) if test else None
    consts = fit(model, samples)
    med_all = _median_error(model, consts, samples)
    judged = med_test if med_test is not None else med_all
    return judged, {
        "constants": consts.to_dict(), "model": model.name, "samples": len(samples),
        "median_abs_rel_error": med_all, "median_abs_rel_error_train": _median_error(model, fitted, train),
        "median_abs_rel_error_holdout": med_test, "machine": machine_info(),
        "target_median_error": TARGET_MEDIAN_ERROR, "pass": bool(judged <= TARGET_MEDIAN_ERROR),
    }


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure, fit, judge and write the calibration JSON (``CostConstants.load`` reads it)."""
    shapes = DEFAULT_SHAPES if args.shapes == "default" else SMALL_SHAPES
    t0 = time.perf_counter()
    samples = measure(shapes, seed=args.seed, progress=not args.no_progress)
    took = time.perf_counter() - t0
    judged, report = _report(samples, args.holdout, args.seed)
    report |= {"shapes": shapes, "measure_seconds": took}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({k: v for k, v in report.items() if k != "shapes"}, indent=2))
    print(f"median |step-time error| {judged:.1%} (target <= {TARGET_MEDIAN_ERROR:.0%}: "
          f"{'PASS' if report['pass'] else 'FAIL'})")
    print(f"wrote {args.out}")
    return 0
