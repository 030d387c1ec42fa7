"""The engine thread (``AsyncEngine``) on stand-in engines: drain then abort on shutdown, typed questions
answered on the engine thread, rejected groups, and a loop that dies (every pending request fails,
health turns 503)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import httpx
import pytest
from server_fixtures import FakeEngine, assert_error, start_thread_server

from agent_engine.server import AsyncEngine, EngineStoppedError, RequestSpec
from scheduler import SamplingParams

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]


def test_async_engine_drains_then_aborts_on_shutdown():
    engine = AsyncEngine(FakeEngine(max_model_len=10**6, step_delay=0.01)).start()
    params = SamplingParams(max_tokens=5)

    async def run() -> list[Any]:
        group = engine.submit([RequestSpec("short", "a", params),
                               RequestSpec("long", "b", SamplingParams(max_tokens=100000))])
        await group.accepted()
        stopper = threading.Thread(target=engine.shutdown, args=(0.5,))
        stopper.start()
        finals = [ev async for ev in group.events() if ev.finished]
        stopper.join(10)
        with pytest.raises(EngineStoppedError):
            engine.submit([RequestSpec("late", "c", params)])
        return finals

    finals = {ev.request_id: ev for ev in asyncio.run(run())}
    assert finals["short"].output.outputs[0].finish_reason == "length" and finals["short"].index == 0
    assert finals["long"].output is None and finals["long"].error is None and finals["long"].index == 1
    assert not engine.healthy and engine.dead_reason is None


class _BrokenStats(FakeEngine):
    def stats(self) -> Any:
        raise ZeroDivisionError("stats failed")


def test_the_engine_thread_answers_typed_questions():
    engine = AsyncEngine(FakeEngine()).start()
    broken = AsyncEngine(_BrokenStats()).start()

    async def run() -> None:
        stats = await engine.stats()
        assert stats.scheduler.num_running == 0 and stats.num_failed_steps == 0
        routing = await engine.routing_stats()
        assert routing.leases == () and routing.free_blocks == 100
        assert await engine.has_unfinished_requests() is False
        with pytest.raises(ZeroDivisionError):  # what the engine raised reaches the asker; the loop goes on
            await broken.stats()
        assert await broken.has_unfinished_requests() is False and broken.healthy

    try:
        asyncio.run(run())
        assert engine.stats_sync().scheduler.num_running == 0
    finally:
        engine.shutdown(drain_timeout=0)
        broken.shutdown(drain_timeout=0)


def test_the_engine_thread_runs_only_the_named_commands():
    from agent_engine.server import engine_commands

    commands = {c.__name__ for c in engine_commands.Command.__args__}
    assert commands == {"AddRequests", "AbortRequests", "ReleaseJob", "TakeStats", "TakeRoutingStats", "CheckBusy"}
    for name in commands:  # frozen messages that carry no code
        cls = getattr(engine_commands, name)
        assert cls.__dataclass_params__.frozen
        assert not any("Callable" in str(f.type) for f in dataclasses.fields(cls)), name


def test_questions_pending_when_the_loop_dies_fail_with_engine_dead():
    from agent_engine.server.engine_commands import CheckBusy, TakeStats
    from agent_engine.server.groups import EngineDeadError

    engine = AsyncEngine(FakeEngine())  # not started: the questions wait in the queue
    stats, busy = engine._ask(TakeStats), engine._ask(CheckBusy)
    engine._die(SystemError("the engine loop crashed"))
    for future in (stats, busy):
        with pytest.raises(EngineDeadError, match="SystemError"):
            future.result(1)


def test_async_engine_rejected_groups():
    engine = AsyncEngine(FakeEngine()).start()

    async def run() -> None:
        group = engine.submit([RequestSpec("ok", "a", SamplingParams(max_tokens=2)),
                               RequestSpec("bad", [99], SamplingParams(max_tokens=2))])
        assert engine.num_queued() == 2
        with pytest.raises(ValueError, match="vocabulary"):
            await group.accepted()
        assert engine.num_queued() == 0
        assert await engine.has_unfinished_requests() is False  # "ok" was taken back

    try:
        asyncio.run(run())
        assert engine.stats_sync().scheduler.num_running == 0
    finally:
        engine.shutdown(drain_timeout=0)


def test_prompts_are_prepared_on_the_tokenizer_thread_not_the_engine_thread():
    class _Recording(FakeEngine):
        threads: list[str] = []

        def tokenize_prompt(self, prompt: Any) -> tuple[str | None, list[int]]:
            self.threads.append(threading.current_thread().name)
            return super().tokenize_prompt(prompt)

    engine = AsyncEngine(_Recording()).start()
    rendered: list[str] = []

    def render(eng: Any) -> str:
        rendered.append(threading.current_thread().name)
        return "templated"

    async def run() -> Any:
        group = engine.submit([RequestSpec("t", render, SamplingParams(max_tokens=2), fill_max_tokens=True)])
        await group.accepted()
        return [ev async for ev in group.events() if ev.finished][0]

    try:
        final = asyncio.run(run())
        assert final.output.outputs[0].finish_reason == "length"
        assert rendered and _Recording.threads
        assert all(name.startswith("tokenizer") for name in rendered + _Recording.threads)
        # fill_max_tokens was resolved before the engine saw the request: the room left under max_model_len.
        assert len(final.output.outputs[0].token_ids) == engine.engine.max_model_len - len("templated")
    finally:
        engine.shutdown(drain_timeout=0)


class _DyingEngine(FakeEngine):
    """A ``FakeEngine`` whose loop crashes on the first step that has work (tests the dead-loop path)."""

    def __init__(self) -> None:
        super().__init__(max_model_len=64)

    def step(self) -> list[Any]:
        if self.reqs:
            time.sleep(0.2)
            raise SystemError("the engine loop crashed")
        return []


def test_dead_loop_fails_pending_and_health_503():
    from agent_engine.server.async_engine import AsyncEngine

    dying = start_thread_server(AsyncEngine(_DyingEngine()))
    try:
        assert httpx.get(dying.base_url + "/health", timeout=10).status_code == 200
        err = assert_error(httpx.post(dying.base_url + "/v1/completions", json={"prompt": "x"}, timeout=30),
                           500)
        assert "died" in err["message"]
        err = assert_error(httpx.get(dying.base_url + "/health", timeout=10), 503, "unhealthy")
        assert "SystemError" in err["message"]
        assert_error(httpx.post(dying.base_url + "/v1/completions", json={"prompt": "x"}, timeout=30), 503)
        assert httpx.get(dying.base_url + "/metrics", timeout=10).status_code == 200
    finally:
        dying.stop()


class _StuckEngine(FakeEngine):
    """A FakeEngine whose steps block while ``stuck`` is set (a step loop that stopped advancing)."""

    def __init__(self) -> None:
        super().__init__()
        self.stuck = threading.Event()
        self.released = threading.Event()

    def step(self) -> list[Any]:
        if self.reqs and self.stuck.is_set():
            self.released.wait(30)
        return super().step()


def test_health_turns_503_while_the_loop_has_work_and_does_not_advance():
    engine = _StuckEngine()
    srv = start_thread_server(AsyncEngine(engine, stall_timeout=0.3))
    try:
        time.sleep(0.6)  # idle for longer than the stall timeout: still healthy
        assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200
        engine.stuck.set()
        result: list[Any] = []
        poster = threading.Thread(target=lambda: result.append(httpx.post(
            srv.base_url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=60)))
        poster.start()
        deadline = time.monotonic() + 20
        while (r := httpx.get(srv.base_url + "/health", timeout=10)).status_code == 200:
            assert time.monotonic() < deadline, "health never reported the stalled loop"
            time.sleep(0.05)
        err = assert_error(r, 503, "unhealthy")
        assert "has not advanced" in err["message"] and "--health-stall-timeout" in err["message"]
        engine.released.set()
        poster.join(30)
        assert result[0].status_code == 200
        assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200  # advancing again
    finally:
        engine.released.set()
        srv.stop()


class _SlowGrammarEngine(FakeEngine):
    """A FakeEngine whose grammar compiles run until cancelled (a grammar that would never finish)."""

    def __init__(self) -> None:
        super().__init__()
        self.compiling = threading.Event()
        self.cancels: list[threading.Event] = []

    def compile_grammar(self, spec: Any, limits: Any, cancel: threading.Event, fast: bool = False) -> Any:
        from agent_engine.engine.grammar_workers import GrammarCancelled

        self.cancels.append(cancel)
        self.compiling.set()
        if not cancel.wait(60):
            raise AssertionError("the compile was never cancelled")
        raise GrammarCancelled("cancelled")


def _constrained(rid: str) -> RequestSpec:
    from scheduler import StructuredSpec

    return RequestSpec(rid, "a", SamplingParams(max_tokens=2, structured=StructuredSpec.regex("a+")))


async def _compiling(engine: AsyncEngine, fake: _SlowGrammarEngine, rid: str) -> Any:
    """Submit a constrained request and return its group once its grammar compile runs."""
    group = engine.submit([_constrained(rid)])
    while not fake.compiling.is_set():
        await asyncio.sleep(0.01)
    return group


def test_aborting_a_group_while_its_grammar_compiles_cancels_the_compile():
    fake = _SlowGrammarEngine()
    engine = AsyncEngine(fake).start()

    async def run() -> None:
        group = await _compiling(engine, fake, "g")
        assert not fake.cancels[0].is_set()
        group.abort()  # the client went away
        with pytest.raises(EngineStoppedError, match="cancelled before it started"):
            await group.accepted()
        assert fake.cancels[0].is_set() and engine.num_queued() == 0
        assert await engine.has_unfinished_requests() is False  # nothing reached the engine

    try:
        asyncio.run(run())
    finally:
        engine.shutdown(drain_timeout=0.0)


def test_shutdown_does_not_wait_for_a_running_compile():
    fake = _SlowGrammarEngine()
    engine = AsyncEngine(fake).start()

    async def run() -> None:
        group = await _compiling(engine, fake, "s")
        t0 = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, lambda: engine.shutdown(drain_timeout=0.0))
        assert time.monotonic() - t0 < 30  # the compile (60 s unless cancelled) was not waited for
        assert fake.cancels[0].is_set()
        with pytest.raises(EngineStoppedError, match="shutting down"):
            await group.accepted()

    asyncio.run(run())


def test_the_server_config_sets_the_grammar_limits_and_the_stall_timeout():
    from agent_engine.engine.grammar_limits import GrammarLimits
    from agent_engine.server.server_config import ServerConfig

    limits = GrammarLimits(timeout_s=2.5, max_size=1234, workers=3)
    engine = AsyncEngine.from_config(FakeEngine(), ServerConfig(grammar_limits=limits, health_stall_timeout=7.0))
    try:
        assert engine.grammar_limits == limits and engine.stall_timeout == 7.0
        assert engine._grammars.pool.workers == 3 and engine._grammars.pool.per_tenant == 2
    finally:
        engine.shutdown(drain_timeout=0.0)
