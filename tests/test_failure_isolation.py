"""One request's failure never hurts another: a poisoned sampling row or output step fails only it."""

from __future__ import annotations

import pytest

from agent_engine.config import EngineConfig
from agent_engine.engine.llm_engine import LLMEngine
from scheduler import SamplingParams

pytestmark = pytest.mark.slow


def _run_all(eng: LLMEngine) -> dict[str, object]:
    finals = {}
    while eng.has_unfinished_requests():
        for out in eng.step():
            if out.finished:
                finals[out.request_id] = out
    return finals


@pytest.fixture(scope="module")
def eng() -> LLMEngine:
    return LLMEngine(EngineConfig(num_kv_blocks=128, max_model_len=256))


def test_a_request_whose_sampling_fails_ends_alone(eng, monkeypatch):
    real = eng.runner.sampler.sample

    def poisoned(logits, reqs):
        if any(r.request_id == "poison" for r in reqs):
            raise OverflowError("top_k does not fit")
        return real(logits, reqs)

    monkeypatch.setattr(eng.runner.sampler, "sample", poisoned)
    sp = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    for rid in ("a", "poison", "b"):
        eng.add_request(eng.make_request(rid, f"prompt of {rid}", sp))
    finals = _run_all(eng)
    assert finals["poison"].outputs[0].finish_reason == "error"
    for rid in ("a", "b"):
        assert finals[rid].outputs[0].finish_reason == "length" and len(finals[rid].outputs[0].token_ids) == 6
    assert eng.stats().scheduler.blocks_in_use == 0 and eng.stats().num_failed_steps == 0


def test_a_request_whose_output_processing_fails_ends_alone(eng, monkeypatch):
    sp = SamplingParams(max_tokens=5, temperature=0, ignore_eos=True)
    for rid in ("c", "bad-detok"):
        eng.add_request(eng.make_request(rid, f"prompt of {rid}", sp))
    state = eng._states["bad-detok"]

    def broken(ids):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad byte")

    monkeypatch.setattr(state.detokenizer, "push", broken)
    finals = _run_all(eng)
    assert finals["bad-detok"].outputs[0].finish_reason == "error"
    assert finals["c"].outputs[0].finish_reason == "length"
    assert eng.stats().scheduler.blocks_in_use == 0
