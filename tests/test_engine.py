"""LLMEngine / LLM behaviour on the embedded default model: API shapes, bad input, stops, aborts,
seeded sampling, and CONTINUUM pins driven by the estimator through the engine."""

from __future__ import annotations

import pytest

from agent_engine import LLM, JobHints, LLMEngine, SamplingParams
from agent_engine.config import EngineConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm() -> LLM:
    return LLM(num_kv_blocks=256, max_model_len=1024)


def test_generate_shapes_and_prompt_forms(llm: LLM) -> None:
    sp = SamplingParams(max_tokens=8, temperature=0)
    outs = llm.generate(["def fib(n):", "import os"], sp, use_tqdm=False)
    assert len(outs) == 2
    o = outs[0]
    assert o.prompt == "def fib(n):" and o.prompt_token_ids
    assert len(o.outputs[0].token_ids) <= 8 and isinstance(o.outputs[0].text, str)
    assert o.outputs[0].finish_reason in ("stop", "length")
    by_ids = llm.generate({"prompt_token_ids": o.prompt_token_ids}, sp, use_tqdm=False)[0]
    assert by_ids.outputs[0].token_ids == o.outputs[0].token_ids and by_ids.prompt is None
    assert llm.generate(o.prompt_token_ids, sp, use_tqdm=False)[0].outputs[0].token_ids == o.outputs[0].token_ids


def test_bad_input_raises_value_error_and_leaks_nothing(llm: LLM) -> None:
    eng = llm.engine
    for bad in ("", [eng.vocab_size], [-1], [[]], {"foo": 1}, 3.5):
        with pytest.raises(ValueError):
            llm.generate(bad, SamplingParams(max_tokens=2), use_tqdm=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        llm.generate([1] * 1020, SamplingParams(max_tokens=10), use_tqdm=False)
    with pytest.raises(ValueError):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError):
        llm.generate(["ok", ""], SamplingParams(max_tokens=2), use_tqdm=False)  # nothing stays queued
    assert not eng.has_unfinished_requests() and eng.scheduler.kv.pool.num_used_blocks == 0
    with pytest.raises(ValueError):
        LLM(no_such_option=1)


def test_stop_string_truncates_and_finishes(llm: LLM) -> None:
    sp = SamplingParams(max_tokens=24, temperature=0, ignore_eos=True)
    full = llm.generate("hello world", sp, use_tqdm=False)[0].outputs[0]
    stop = full.text[5:8]
    assert stop
    got = llm.generate("hello world", SamplingParams(max_tokens=24, temperature=0, ignore_eos=True, stop=[stop]),
                       use_tqdm=False)[0].outputs[0]
    assert got.finish_reason == "stop" and got.text == full.text[: full.text.index(stop)]
    assert len(got.token_ids) < len(full.token_ids)


def test_seeded_sampling_is_reproducible(llm: LLM) -> None:
    sp = SamplingParams(max_tokens=12, temperature=1.0, top_p=0.9, seed=7, ignore_eos=True)
    a = llm.generate(["x = 1", "y = 2"], sp, use_tqdm=False)
    b = llm.generate(["y = 2", "x = 1"], sp, use_tqdm=False)
    assert a[0].outputs[0].token_ids == b[1].outputs[0].token_ids
    c = llm.generate("x = 1", SamplingParams(max_tokens=12, temperature=1.0, seed=8, ignore_eos=True),
                     use_tqdm=False)[0]
    assert c.outputs[0].token_ids != a[0].outputs[0].token_ids


def test_abort_frees_blocks(llm: LLM) -> None:
    eng = llm.engine
    eng.add_request(eng.make_request("a", "some prompt text", SamplingParams(max_tokens=50, ignore_eos=True)))
    eng.step()
    assert eng.scheduler.kv.pool.num_used_blocks > 0
    eng.abort("a")
    assert eng.scheduler.kv.pool.num_used_blocks == 0 and not eng.has_unfinished_requests()
    eng.step()  # tells the runner to drop the request's state


def test_logprobs_reported(llm: LLM) -> None:
    out = llm.generate("abc", SamplingParams(max_tokens=4, temperature=0, logprobs=2, ignore_eos=True),
                       use_tqdm=False)[0].outputs[0]
    assert out.logprobs is not None and len(out.logprobs) == 4 and all(lp <= 0 for lp in out.logprobs)
    assert out.top_logprobs is not None and len(out.top_logprobs[0]) >= 2


def _run(eng: LLMEngine, rid: str) -> object:
    while True:
        for o in eng.step():
            if o.request_id == rid and o.finished:
                return o


def test_continuum_pins_turn_and_next_turn_hits() -> None:
    eng = LLMEngine(EngineConfig(num_kv_blocks=64, max_model_len=512, policy="continuum",
                                 ttl_policy="fixed", pin_threshold=30.0))
    sp = SamplingParams(max_tokens=20, temperature=0, ignore_eos=True)
    prompt = list(range(10, 110))
    eng.add_request(eng.make_request("t1", prompt, sp, JobHints.for_job("job", tool_name="bash:ls")))
    o1 = _run(eng, "t1")
    assert eng.scheduler.policy.leases.has_lease("job")
    # Churn: other requests fill the pool; the pinned blocks must survive.
    for k in range(3):
        # One-off requests: no job, and is_last_step says so (else each is an inferred job's turn).
        eng.add_request(eng.make_request(f"x{k}", [200 + k] * 300, SamplingParams(max_tokens=5, ignore_eos=True),
                                         JobHints(is_last_step=True)))
    while eng.has_unfinished_requests():
        eng.step()
    ctx = prompt + o1.outputs[0].token_ids
    eng.add_request(eng.make_request("t2", ctx + [5, 6, 7], sp,
                                     JobHints.for_job("job", tool_name="bash:cat", is_last_step=True)))
    o2 = _run(eng, "t2")
    computed = len(ctx) - 1  # the last sampled token of turn 1 was never fed back
    assert o2.num_cached_tokens == computed // 16 * 16
    st = eng.stats()
    assert st.scheduler.pins.hit == 1 and st.jobs.jobs_finished == 1 + 3
    # The three hint-less churn requests became inferred one-turn jobs, ended by their last step.
    assert st.job_inference is not None and st.job_inference.new_jobs == 3 and st.job_inference.joins == 0
    assert dict(st.jobs.estimator)["durations_measured"] == 1
    assert st.scheduler.blocks_in_use == 0


def test_failed_step_fails_its_batch_without_poisoning_the_prefix_cache(llm: LLM) -> None:
    eng = llm.engine
    prompt = list(range(300, 364))  # 4 full blocks
    sp = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    expected = llm.generate({"prompt_token_ids": prompt + [1]}, sp, use_tqdm=False)[0].outputs[0].token_ids
    eng.scheduler.kv.pool.reset_prefix_cache()
    real = eng.runner.execute
    calls = {"n": 0}

    def fail_once(out):  # the KV of this step is never written
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected fault")
        return real(out)

    eng.runner.execute = fail_once
    try:
        eng.add_request(eng.make_request("doomed", prompt + [1], sp, JobHints.for_job("jf", is_last_step=True)))
        outs = eng.step()
        assert [o.outputs[0].finish_reason for o in outs] == ["error"]
        assert eng.scheduler.kv.pool.num_used_blocks == 0 and not eng.has_unfinished_requests()
        assert eng.job_hooks.estimator.job_turns("jf") is None
        retry = llm.generate({"prompt_token_ids": prompt + [1]}, sp, use_tqdm=False)[0]
    finally:
        eng.runner.execute = real
    assert retry.num_cached_tokens == 0  # nothing from the failed step became a prefix hit
    assert retry.outputs[0].token_ids == expected


def test_aborted_last_step_ends_the_job(llm: LLM) -> None:
    eng = llm.engine
    eng.add_request(eng.make_request("last", "final turn", SamplingParams(max_tokens=50, ignore_eos=True),
                                     JobHints.for_job("jab", is_last_step=True)))
    eng.step()
    assert eng.job_hooks.estimator.job_turns("jab") is not None
    eng.abort("last")
    assert eng.job_hooks.estimator.job_turns("jab") is None and eng.scheduler.kv.pool.num_used_blocks == 0
