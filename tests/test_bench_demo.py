"""The demo's cases: the live agent turns on a real model, or the matched regime on the embedded model."""

from __future__ import annotations

import argparse

import pytest

from agent_engine.model.sources import ModelUnavailableError
from agent_engine.workloads.traces import load_trace
from benchmarks import demo
from benchmarks.jct_config import MATCHABLE

pytestmark = pytest.mark.core


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    demo.add_arguments(p)
    return p.parse_args(list(argv))


def test_the_live_case_replays_the_agents_own_turns_at_full_scale() -> None:
    case = demo.live_case("qwen2.5-coder-0.5b", "out-x")
    assert case.cfg.trace == "live" and (case.cfg.token_scale, case.cfg.time_scale) == (1.0, 1.0)
    assert case.cfg.match == {"num_kv_blocks"}  # only the pool is sized for the reference pressure
    assert case.cfg.extra_engine_args == ("--model", "qwen2.5-coder-0.5b")
    assert len(case.jobs) == demo.LIVE_JOBS and all(len(j.turns) >= 2 for j in case.jobs)
    assert case.cfg.policies == ("fcfs", "continuum")


def test_the_live_trace_is_real_agent_turns_that_fit_the_live_context() -> None:
    jobs = load_trace("live")
    assert len(jobs) >= demo.LIVE_JOBS
    for job in jobs:
        assert job.meta.get("source") and job.turns[-1].tool_seconds is None
        assert all(t.tool_seconds is not None and t.tool_seconds >= 0 for t in job.turns[:-1])
        assert job.turns[-1].prompt_tokens + job.turns[-1].output_tokens <= demo.LIVE_MAX_MODEL_LEN


def test_the_matched_case_leaves_every_knob_to_the_regime() -> None:
    case = demo.matched_case("out-x")
    assert case.cfg.match == frozenset(MATCHABLE) and case.cfg.extra_engine_args == ()
    assert "embedded" in case.title and len(case.jobs) == demo.DEMO_JOBS


def test_without_the_live_model_the_demo_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def unavailable(spec: str) -> None:
        raise ModelUnavailableError(f"cannot download {spec} with pip (no network)")

    monkeypatch.setattr("agent_engine.model.gguf_native.prepare_native", unavailable)
    case = demo.choose_case(_args())
    assert case.cfg.match == frozenset(MATCHABLE)
    assert "falling back to the embedded model in the matched regime" in capsys.readouterr().out
    with pytest.raises(ModelUnavailableError):  # a model the user named is never silently replaced
        demo.choose_case(_args("--model", "qwen2.5-coder-1.5b"))


def test_the_live_model_is_fetched_before_the_live_case(monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[str] = []
    monkeypatch.setattr("agent_engine.model.gguf_native.prepare_native", fetched.append)
    case = demo.choose_case(_args())
    assert fetched == [demo.LIVE_MODEL] and case.cfg.trace == "live"
    assert demo.choose_case(_args("--matched")).cfg.match == frozenset(MATCHABLE)
    assert fetched == [demo.LIVE_MODEL]  # the embedded model needs no fetch
