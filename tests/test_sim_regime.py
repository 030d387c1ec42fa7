"""The regime of a JCT run: prefill curves, re-prefill against tool seconds, KV pressure, matched scales."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from agent_engine.sim.regime import (
    REFERENCE_KV_PRESSURE,
    PrefillCurve,
    Regime,
    match_scales,
    max_token_scale,
    peak_contexts,
    pool_tokens_for,
    reference_regime,
    returning_turns,
    workload_regime,
)
from agent_engine.workloads.replay.plan import ReplayOptions, plan_job
from agent_engine.workloads.traces import load_trace
from agent_engine.workloads.traces.format import TraceJob, TraceTurn

pytestmark = pytest.mark.core


def _job(job_id: str, prompts: list[int], outputs: list[int], tools: list[float]) -> TraceJob:
    turns = [TraceTurn(prompt_tokens=p, output_tokens=o, tool_name="bash:ls",
                       tool_seconds=tools[i] if i < len(prompts) - 1 else None)
             for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
    return TraceJob(job_id=job_id, turns=turns, meta={})


JOBS = [_job("a", [1000, 2000, 4000], [100, 100, 100], [1.0, 3.0]),
        _job("b", [500, 1500], [50, 50], [2.0])]
LINEAR = PrefillCurve(((1000, 1.0), (4000, 4.0)))  # one millisecond per token


def test_a_prefill_curve_interpolates_and_never_gets_cheaper_per_token_past_its_points() -> None:
    curve = PrefillCurve(((2048, 1.0), (512, 0.1), (1024, 0.3)))  # sorted on construction
    assert curve.points[0] == (512, 0.1)
    assert curve(256) == pytest.approx(0.05)  # proportional below the first point
    assert curve(768) == pytest.approx(0.2)  # linear between points
    assert curve(3072) == pytest.approx(1.0 + 0.7 / 1024 * 1024)  # the last segment's slope beyond
    assert curve.tokens_per_s()[512] == pytest.approx(5120)
    with pytest.raises(ValueError):
        PrefillCurve(())
    with pytest.raises(ValueError):
        PrefillCurve(((100, 0.0),))


def test_the_regime_prices_each_returning_turn_by_its_previous_context() -> None:
    options = ReplayOptions(progress=False)
    assert returning_turns(JOBS, options) == [(1100, 1.0), (2100, 3.0), (550, 2.0)]
    regime = workload_regime(JOBS, options, LINEAR, pool_tokens=4100)
    assert regime.reprefill_s == pytest.approx((1.1 + 2.1 + 0.55) / 3)
    assert regime.tool_s == pytest.approx(2.0)
    assert regime.ratio == pytest.approx(regime.reprefill_s / 2.0)
    assert regime.kv_pressure == pytest.approx(2 * (4100 + 1550) / 2 / 4100)  # both jobs in flight
    closed = workload_regime(JOBS, replace(options, concurrency=1), LINEAR, pool_tokens=4100)
    assert closed.kv_pressure == pytest.approx((4100 + 1550) / 2 / 4100)
    assert "ratio" in regime.describe() and "KV pressure" in regime.describe()
    assert Regime(1.0, 0.0).ratio == math.inf and Regime(1.0, 0.0).to_dict()["ratio"] is None
    with pytest.raises(ValueError, match="one turn"):
        workload_regime([_job("c", [10], [1], [])], options, LINEAR)


def test_scales_move_the_ratio_the_way_the_matching_assumes() -> None:
    base = ReplayOptions(progress=False)
    ratios = [workload_regime(JOBS, replace(base, token_scale=s), LINEAR).ratio for s in (0.1, 0.3, 1.0)]
    assert ratios == sorted(ratios)
    faster_tools = workload_regime(JOBS, replace(base, time_scale=0.5), LINEAR).ratio
    assert faster_tools == pytest.approx(2 * ratios[-1])


def test_a_reachable_ratio_is_met_by_the_token_scale_alone() -> None:
    options = ReplayOptions(progress=False, token_scale=0.1)
    token, time_scale = match_scales(JOBS, options, LINEAR, target_ratio=0.5, max_model_len=8192)
    assert time_scale == 1.0
    got = workload_regime(JOBS, replace(options, token_scale=token), LINEAR).ratio
    assert got == pytest.approx(0.5, rel=0.01)


def test_a_ratio_past_the_models_context_shortens_the_tools_and_drops_no_turn() -> None:
    options = ReplayOptions(progress=False, max_model_len=2048)
    token, time_scale = match_scales(JOBS, options, LINEAR, target_ratio=5.0, max_model_len=2048)
    assert token == max_token_scale(JOBS, options, 2048) < 1.0
    assert 0 < time_scale < 1.0
    matched = replace(options, token_scale=token, time_scale=time_scale)
    assert workload_regime(JOBS, matched, LINEAR).ratio == pytest.approx(5.0, rel=0.01)
    for i, job in enumerate(JOBS):
        plan = plan_job(job, i, matched)
        assert not plan.truncated and len(plan.turns) == len(job.turns)


def test_a_knob_the_user_gave_is_kept() -> None:
    options = ReplayOptions(progress=False, token_scale=0.2, time_scale=0.9)
    token, time_scale = match_scales(JOBS, options, LINEAR, 5.0, 8192, scale_tokens=False)
    assert token == 0.2 and time_scale < 0.9
    token, time_scale = match_scales(JOBS, options, LINEAR, 5.0, 8192, scale_time=False)
    assert time_scale == 0.9 and token > 0.2
    with pytest.raises(ValueError):
        match_scales(JOBS, options, LINEAR, 0.0, 8192)


def test_the_pool_gives_the_pressure_asked_for_and_always_fits_the_largest_job() -> None:
    options = ReplayOptions(progress=False)
    pool = pool_tokens_for(JOBS, options, 1.2)
    assert workload_regime(JOBS, options, LINEAR, pool).kv_pressure == pytest.approx(1.2, rel=0.01)
    assert pool_tokens_for(JOBS, options, 100.0) == max(peak_contexts(JOBS, options)) == 4100
    with pytest.raises(ValueError):
        pool_tokens_for(JOBS, options, 0.0)


def test_the_reference_is_the_paper_setting_on_swe_agent_jobs() -> None:
    reference = reference_regime()
    assert reference is reference_regime()  # computed once
    assert reference.kv_pressure == REFERENCE_KV_PRESSURE
    # An 8B model on an H100 re-prefills contexts of tens of thousands of tokens in about a second.
    assert 0.3 < reference.reprefill_s < 3 and 1.0 < reference.ratio < 3.0
    short = reference_regime(load_trace(None, max_jobs=4))
    assert 0 < short.reprefill_s and short.kv_pressure == REFERENCE_KV_PRESSURE
