"""CONTINUUM's regime: what re-prefilling an evicted turn costs against the tool call it waited on, and KV pressure.

A job's turn ends with a tool call; while the tool runs, its KV blocks are either pinned (CONTINUUM)
or free to be evicted (FCFS). A returning turn whose blocks were evicted re-prefills the context it
had (its previous prompt and answer). Pinning pays when that re-prefill is costly against the time
the blocks sit idle, and matters when the pool cannot hold every job's context at once. Two numbers
place a workload:

- ``ratio``: mean seconds to re-prefill a returning turn's previous context alone on the serving
  engine, over mean tool seconds between turns (both from the replay plan: its token and time
  scales applied);
- ``kv_pressure``: the peak contexts of the jobs in flight (closed loop: the concurrency) over the
  pool's tokens (above 1: the pool cannot hold them all).

The reference regime is the paper's setting as the simulator prices it: Llama-3.1-8B on one H100
(the cost model's roofline clock, ``specs``) running the paper's kind of jobs, whole, at full token
scale (the shipped trace: SWE agent jobs fitted to real mini-swe-agent runs), and the KV pressure of
the simulated H100 past its knee (``REFERENCE_KV_PRESSURE``). It is one fixed regime, whatever trace a
run replays: a trace of short jobs is brought to it, not given a weaker target. ``match_scales`` picks the
token scale (and, where the model's context caps it, the time scale) that puts a workload on this
machine at the reference ratio, and ``pool_tokens_for`` the pool that gives the reference pressure.

Invariants: pure (no engine, no torch); a ratio rises with the token scale (re-prefill seconds grow
with the context) and falls with the time scale; every chosen token scale keeps every planned turn of
every job within ``max_model_len``, so a matched replay drops no turn the unscaled plan had.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from agent_engine.sim.cost_model import CostConstants, CostModel
from agent_engine.sim.specs import get_gpu, get_model
from agent_engine.workloads.replay.plan import JobPlan, ReplayOptions, plan_job
from agent_engine.workloads.traces.format import TraceJob
from agent_engine.workloads.traces.source import load_trace

__all__ = ["REFERENCE_GPU", "REFERENCE_KV_PRESSURE", "REFERENCE_MODEL", "PrefillCurve", "Regime",
           "match_scales", "max_token_scale", "peak_contexts", "pool_tokens_for", "reference_regime", "returning_turns",
           "workload_regime"]

REFERENCE_MODEL = "llama-3.1-8b"
REFERENCE_GPU = "h100"
# The simulated H100 past its knee (docs/benchmarks.md, the real trace at full token scale): at 0.04
# jobs/s, the largest FCFS / CONTINUUM gap, CONTINUUM holds 0.04 x 807 s = 32 jobs in flight, each
# peaking at 37,659 tokens on average, in vLLM's pool of 444,816 tokens: 32 x 37,659 / 444,816 = 2.7.
REFERENCE_KV_PRESSURE = 2.7
_SCALE_FLOOR = 1e-3  # the smallest token scale ``match_scales`` considers
_SEARCH_STEPS = 40

PrefillSeconds = Callable[[int], float]


@dataclass(frozen=True)
class Regime:
    """Mean re-prefill seconds of a returning turn, mean tool seconds, and KV pressure (None: unknown)."""

    reprefill_s: float
    tool_s: float
    kv_pressure: float | None = None

    @property
    def ratio(self) -> float:
        """Re-prefill over tool seconds (infinite when the tools take no time)."""
        return self.reprefill_s / self.tool_s if self.tool_s > 0 else math.inf

    def describe(self) -> str:
        """One line: ``re-prefill 0.41 s per evicted turn vs tool 0.37 s (ratio 1.11), KV pressure 2.7``."""
        pressure = "" if self.kv_pressure is None else f", KV pressure {self.kv_pressure:.2f}"
        return (f"re-prefill {self.reprefill_s:.2f} s per evicted turn vs tool {self.tool_s:.2f} s "
                f"(ratio {self.ratio:.2f}){pressure}")

    def to_dict(self) -> dict[str, float | None]:
        """The JSON form (``ratio`` included)."""
        return {"reprefill_s": round(self.reprefill_s, 4), "tool_s": round(self.tool_s, 4),
                "ratio": round(self.ratio, 4) if math.isfinite(self.ratio) else None,
                "kv_pressure": None if self.kv_pressure is None else round(self.kv_pressure, 3)}


@dataclass(frozen=True)
class PrefillCurve:
    """Seconds to prefill a fresh context of N tokens, from measured ``(tokens, seconds)`` points.

    Between points: linear; below the first: proportional to N; past the last: the last segment's
    slope (a longer context costs at least as much per token). ``ValueError`` without a point."""

    points: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        if not self.points or any(n <= 0 or s <= 0 for n, s in self.points):
            raise ValueError("a prefill curve needs measured points of positive tokens and seconds")
        object.__setattr__(self, "points", tuple(sorted(self.points)))

    def __call__(self, tokens: int) -> float:
        xs = [float(n) for n, _ in self.points]
        ys = [s for _, s in self.points]
        if tokens <= xs[0]:
            return ys[0] * tokens / xs[0]
        if tokens <= xs[-1]:
            return float(np.interp(tokens, xs, ys))
        if len(xs) == 1:
            return ys[0] * tokens / xs[0]
        slope = max((ys[-1] - ys[-2]) / (xs[-1] - xs[-2]), ys[-1] / xs[-1])
        return ys[-1] + slope * (tokens - xs[-1])

    def tokens_per_s(self) -> dict[int, float]:
        """Each measured length's prompt tokens per second."""
        return {n: n / s for n, s in self.points}


def _plans(jobs: Sequence[TraceJob], options: ReplayOptions) -> list[JobPlan]:
    """The replay's plan of each job it sends (the first ``options.max_jobs``)."""
    return [plan_job(job, i, options) for i, job in enumerate(jobs[: options.max_jobs] if options.max_jobs else jobs)]


def returning_turns(jobs: Sequence[TraceJob], options: ReplayOptions) -> list[tuple[int, float]]:
    """``(context tokens before the tool call, tool seconds)`` of every turn that returns after a tool
    call, as ``options`` plans the replay (its token and time scales, turn and context limits)."""
    return [(prev.prompt_len + prev.max_tokens, prev.sleep_s) for plan in _plans(jobs, options)
            for prev in plan.turns[:-1]]


def peak_contexts(jobs: Sequence[TraceJob], options: ReplayOptions) -> list[int]:
    """Each planned job's largest context (prompt + answer) in tokens."""
    return [max((t.prompt_len + t.max_tokens for t in plan.turns), default=0) for plan in _plans(jobs, options)]


def _in_flight(jobs: Sequence[TraceJob], options: ReplayOptions) -> int:
    n = len(jobs[: options.max_jobs] if options.max_jobs else jobs)
    return min(n, options.concurrency) if options.concurrency else n


def workload_regime(jobs: Sequence[TraceJob], options: ReplayOptions, prefill_seconds: PrefillSeconds,
                    pool_tokens: int | None = None) -> Regime:
    """The regime of replaying ``jobs`` with ``options`` on an engine that prefills as ``prefill_seconds``
    with a pool of ``pool_tokens`` (None: pressure unknown). ``ValueError`` when no turn returns."""
    turns = returning_turns(jobs, options)
    if not turns:
        raise ValueError("no turn returns after a tool call: the jobs have one turn each")
    reprefill = statistics.fmean(prefill_seconds(n) for n, _ in turns)
    tool = statistics.fmean(s for _, s in turns)
    pressure = None
    if pool_tokens:
        peaks = peak_contexts(jobs, options)
        pressure = _in_flight(jobs, options) * statistics.fmean(peaks) / pool_tokens
    return Regime(reprefill, tool, pressure)


def reference_regime(jobs: Sequence[TraceJob] | None = None) -> Regime:
    """The paper's regime: ``REFERENCE_MODEL`` on ``REFERENCE_GPU`` (the simulator's roofline clock)
    re-prefilling ``jobs`` (default: the shipped trace's, every turn) at full token and time scale, with
    ``REFERENCE_KV_PRESSURE``."""
    if jobs is None:
        return _shipped_reference()
    clock = CostModel(get_model(REFERENCE_MODEL), CostConstants.from_gpu(get_gpu(REFERENCE_GPU)))
    regime = workload_regime(jobs, ReplayOptions(progress=False), clock.prefill_time)
    return replace(regime, kv_pressure=REFERENCE_KV_PRESSURE)


@functools.cache
def _shipped_reference() -> Regime:
    return reference_regime(load_trace(None))


def max_token_scale(jobs: Sequence[TraceJob], options: ReplayOptions, max_model_len: int) -> float:
    """The largest token scale (at most 1) at which every turn ``options`` plans at full scale still fits
    ``max_model_len`` (so a scaled replay drops no turn)."""
    plans = _plans(jobs, replace(options, token_scale=1.0, max_model_len=None))
    peak = max((t.prompt_len + t.max_tokens for plan in plans for t in plan.turns), default=0)
    if peak <= 0:
        return 1.0
    # Rounding adds at most one token per turn to the scaled prompt and answer: leave a margin.
    turns = max((len(plan.turns) for plan in plans), default=1)
    return _down(max(_SCALE_FLOOR, min(1.0, (max_model_len - 2 * turns - 2) / peak)))


def _down(scale: float) -> float:
    """``scale`` rounded down to four decimals (a readable value that still fits)."""
    return max(_SCALE_FLOOR, math.floor(scale * 1e4) / 1e4)


def match_scales(jobs: Sequence[TraceJob], options: ReplayOptions, prefill_seconds: PrefillSeconds,
                 target_ratio: float, max_model_len: int, scale_tokens: bool = True,
                 scale_time: bool = True) -> tuple[float, float]:
    """``(token_scale, time_scale)`` that put the replay at ``target_ratio`` (``options`` gives the
    values of a knob that is not free).

    A free token scale is found by bisection (the ratio rises with it), at most the largest scale
    that fits ``max_model_len``; a free time scale then shortens the tools where that token scale
    still falls short (never lengthens them: at most ``options.time_scale``)."""
    if not target_ratio > 0 or not math.isfinite(target_ratio):
        raise ValueError(f"the target ratio must be a positive number, got {target_ratio}")

    def ratio(scale: float) -> float:
        return workload_regime(jobs, replace(options, token_scale=scale), prefill_seconds).ratio

    token = options.token_scale
    if scale_tokens:
        top = max_token_scale(jobs, options, max_model_len)
        if ratio(top) > target_ratio:
            return _bisect(ratio, target_ratio, top), options.time_scale
        token = top
    reached = ratio(token)
    if not scale_time or reached >= target_ratio or not math.isfinite(reached) or reached <= 0:
        return token, options.time_scale
    return token, float(f"{options.time_scale * reached / target_ratio:.4g}")


def _bisect(ratio: Callable[[float], float], target: float, top: float) -> float:
    """The token scale in ``[_SCALE_FLOOR, top]`` whose ratio is ``target`` (geometric bisection)."""
    lo, hi = _SCALE_FLOOR, top
    if ratio(lo) >= target:
        return lo
    for _ in range(_SEARCH_STEPS):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ratio(mid) < target else (lo, mid)
    return _down(hi)


def pool_tokens_for(jobs: Sequence[TraceJob], options: ReplayOptions, pressure: float) -> int:
    """The pool (tokens) that puts the replay at KV ``pressure``, never below the largest job's peak
    context (every job must fit alone)."""
    if not pressure > 0:
        raise ValueError(f"KV pressure must be positive, got {pressure}")
    peaks = peak_contexts(jobs, options)
    if not peaks:
        raise ValueError("no job to size a pool for")
    return max(max(peaks), math.ceil(_in_flight(jobs, options) * statistics.fmean(peaks) / pressure))
