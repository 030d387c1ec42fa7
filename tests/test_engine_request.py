"""The engine's one request message (``EngineRequest``): a frozen value, built the same way by the
server's preparation (``AsyncEngine.submit``) and by the offline API (``LLMEngine.make_request``), and
the only thing ``add_request`` takes; the engine thread's typed commands (a job release)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from server_fixtures import FakeEngine, build_engine, engine_generate

from agent_engine.engine.engine_request import EngineRequest
from agent_engine.server.async_engine import AsyncEngine, RequestSpec, prepare_requests
from scheduler import JobHints, SamplingParams, StructuredSpec


@pytest.mark.core
def test_the_message_is_frozen_and_keeps_each_fact_in_one_place() -> None:
    hints = JobHints.for_job("j", tenant="t-a")
    params = SamplingParams(max_tokens=4, structured=StructuredSpec.regex("a+"))
    request = EngineRequest("r", (1, 2, 3), "abc", params, hints)
    assert (request.tenant, request.structured, request.grammar, request.arrival_time) == (
        "t-a", params.structured, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.request_id = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="at least one token"):
        EngineRequest("r", (), None, params)


@pytest.mark.core
def test_preparation_tokenizes_once_scopes_the_hints_and_fills_max_tokens() -> None:
    engine = FakeEngine(max_model_len=64)
    render_calls: list[str] = []

    def render(eng: object) -> str:
        render_calls.append("rendered")
        return "hello"

    hints = JobHints.for_job("job-1", tenant="t-a", tool_name="bash:ls")
    specs = [RequestSpec("a", "abc", SamplingParams(max_tokens=3), hints=hints),
             RequestSpec("b", render, SamplingParams(max_tokens=1), fill_max_tokens=True, hints=hints,
                         constraint=lambda: StructuredSpec.regex("x+"))]
    a, b = prepare_requests(engine, specs)
    assert a == EngineRequest("a", tuple(engine.tokenizer.encode("abc")), "abc", SamplingParams(max_tokens=3),
                              hints.scoped())
    assert a.hints.job_id == "t-a/job-1" and a.hints.cache_salt == "t-a\x1f"
    assert prepare_requests(engine, specs[:1], share_prefix_cache=True)[0].hints.cache_salt is None
    assert render_calls == ["rendered"] and b.prompt_text == "hello"
    assert b.params.max_tokens == 64 - len("hello") and b.structured == StructuredSpec.regex("x+")
    with pytest.raises(ValueError, match="max-request-tokens"):
        prepare_requests(engine, specs, max_total_tokens=10)


@pytest.mark.core
def test_a_job_release_is_a_command_answered_on_the_engine_thread() -> None:
    fake = FakeEngine()
    fake.pinned_jobs.add("t-a/held")
    engine = AsyncEngine(fake).start()

    async def run() -> tuple[bool | None, bool | None, bool | None]:
        return (await engine.release_job("t-a/held"), await engine.release_job("t-a/held"),
                await engine.release_job("never-seen"))

    try:
        assert asyncio.run(run()) == (True, None, None)  # held, then over (unknown), never known
    finally:
        engine.shutdown(drain_timeout=0)


@pytest.mark.slow
def test_the_offline_and_the_server_paths_build_the_same_message() -> None:
    engine = build_engine()
    sp = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    hints = JobHints.for_job("job", tool_name="bash:ls")
    offline = engine.make_request("r1", "def fib(n):", sp, hints)
    served = prepare_requests(engine, [RequestSpec("r1", "def fib(n):", sp, hints=hints)])[0]
    assert served == offline and offline.prompt_token_ids == tuple(engine.tokenize_prompt("def fib(n):")[1])
    engine.add_request(offline)
    with pytest.raises(ValueError, match="duplicate"):
        engine.add_request(served)
    while engine.has_unfinished_requests():
        engine.step()
    again = engine_generate(engine, "def fib(n):", sp, request_id="r2")
    assert len(again.outputs[0].token_ids) == 4 and again.job_id is None
