"""The grammar compile lanes (``server.grammar_compiles``): a tenant's small or cached output constraint
never waits behind other tenants' large ones, a misjudged constraint leaves the fast lane for the main
one, shutdown answers every compile at once in the API's error shape and waits for none, and a compile
worker killed from outside is a 503, not a 400 blaming the schema.

The fake compiles here block until the test releases or cancels them, so what is asserted is order and
structure (which compile finished while which was still running), never how long something took."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixtures import FakeEngine, assert_error, start_thread_server

from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.grammar_workers import FastLaneExceeded, GrammarCancelled, GrammarWorkerDied
from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.grammar_compiles import FAST_LANE_MAX_COST, GrammarCompiles, expected_cost
from agent_engine.server.server_config import ServerConfig
from agent_engine.server.tokenizer_pool import PoolClosedError
from scheduler import StructuredSpec

pytestmark = [pytest.mark.timeout(120)]

WAIT_S = 20.0  # how long a test waits for something that takes milliseconds (a busy machine is slow)


def _optional_ints(n: int, prefix: str = "p") -> dict[str, Any]:
    return {"type": "object", "properties": {f"{prefix}{i}": {"type": "integer"} for i in range(n)}}


def _small(tag: str) -> StructuredSpec:
    return StructuredSpec.json({"type": "object", "properties": {tag: {"type": "integer"}}, "required": [tag]})


def _large(tag: str) -> StructuredSpec:
    """Like the probe's: 901 optional properties, under the size cap, a whole budget to compile."""
    return StructuredSpec.json(_optional_ints(901, prefix=tag))


class _BlockingEngine(FakeEngine):
    """A FakeEngine whose compiles of ``blocking`` specs run until released or cancelled; it records
    every compile as ``(spec, fast)`` when it starts and when it ends."""

    def __init__(self, blocking: set[StructuredSpec] = frozenset(), cached: set[StructuredSpec] = frozenset(),
                 exceed_fast: set[StructuredSpec] = frozenset()) -> None:
        super().__init__()
        self.blocking, self.cached, self.exceed_fast = set(blocking), set(cached), set(exceed_fast)
        self.started: list[tuple[StructuredSpec, bool]] = []
        self.ended: list[StructuredSpec] = []
        self.release = threading.Event()
        self.cancels: list[threading.Event] = []
        self.lock = threading.Lock()

    def cached_grammar(self, spec: Any) -> ReadyGrammar | None:
        return ReadyGrammar(spec, None) if spec in self.cached else None  # type: ignore[arg-type]

    def compile_grammar(self, spec: Any, limits: Any, cancel: threading.Event, fast: bool = False) -> ReadyGrammar:
        with self.lock:
            self.started.append((spec, fast))
            self.cancels.append(cancel)
        try:
            if fast and spec in self.exceed_fast:
                raise FastLaneExceeded("over the fast budget")
            if spec in self.blocking:
                while not self.release.is_set():
                    if cancel.wait(0.01):
                        raise GrammarCancelled("cancelled")
            return ReadyGrammar(spec, None)  # type: ignore[arg-type]
        finally:
            with self.lock:
                self.ended.append(spec)

    def running(self, spec: StructuredSpec) -> bool:
        with self.lock:
            return any(s == spec for s, _ in self.started) and spec not in self.ended


async def _until(predicate: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.005)


# ---- the cost estimate -------------------------------------------------------------------------------
@pytest.mark.core
def test_the_expected_cost_tells_small_schemas_from_large_ones() -> None:
    assert expected_cost(_large("a")) > 4 * FAST_LANE_MAX_COST
    assert expected_cost(_small("a")) < FAST_LANE_MAX_COST / 20
    described = {"type": "object", "description": "x" * 5000,
                 "properties": {"cmd": {"type": "string", "description": "y" * 5000}}}
    assert expected_cost(StructuredSpec.json(described)) < FAST_LANE_MAX_COST  # descriptions count once
    assert expected_cost(StructuredSpec.choice([f"option-{i}" for i in range(2000)])) > FAST_LANE_MAX_COST
    assert expected_cost(StructuredSpec.regex("(" + "|".join(f"w{i}" for i in range(5000)) + ")")) > FAST_LANE_MAX_COST
    assert expected_cost(StructuredSpec.regex(r"[a-z]{1,8}")) < 10


# ---- fairness ------------------------------------------------------------------------------------------
@pytest.mark.core
def test_a_small_schema_never_waits_behind_two_tenants_large_ones() -> None:
    large = {t: [_large(f"{t}{i}") for i in range(3)] for t in ("a", "c")}
    fake = _BlockingEngine(blocking={s for specs in large.values() for s in specs})
    compiles = GrammarCompiles(fake, GrammarLimits(workers=2))

    async def run() -> None:
        floods = [asyncio.ensure_future(compiles.compile_all(f"tenant-{t}", [s]))
                  for t, specs in large.items() for s in specs]
        await _until(lambda: fake.running(large["a"][0]) and fake.running(large["c"][0]))  # both workers held
        smalls = [_small(f"b{i}") for i in range(5)]
        for small in smalls:  # the well-behaved tenant's new small schemas, one after another
            got = await asyncio.wait_for(compiles.compile_all("tenant-b", [small]), WAIT_S)
            assert got[small].spec == small
        assert fake.running(large["a"][0]) and fake.running(large["c"][0])  # it never waited for them
        assert all((small, True) in fake.started for small in smalls)  # the fast lane
        assert not any(fast for s, fast in fake.started if s in fake.blocking)  # large ones: the main lane
        fake.release.set()
        await asyncio.wait_for(asyncio.gather(*floods), WAIT_S)

    try:
        asyncio.run(run())
    finally:
        compiles.close()


@pytest.mark.core
def test_a_cached_large_schema_waits_for_no_lane() -> None:
    known = _large("known")
    busy = [_large("x"), _large("y")]
    fake = _BlockingEngine(blocking=set(busy), cached={known})
    compiles = GrammarCompiles(fake, GrammarLimits(workers=2))

    async def run() -> None:
        floods = [asyncio.ensure_future(compiles.compile_all(f"t{i}", [s])) for i, s in enumerate(busy)]
        await _until(lambda: all(fake.running(s) for s in busy))
        got = await asyncio.wait_for(compiles.compile_all("b", [known]), WAIT_S)
        assert got[known].spec == known and known not in [s for s, _ in fake.started]  # not compiled again
        for flood in floods:
            flood.cancel()

    try:
        asyncio.run(run())
    finally:
        compiles.close()


@pytest.mark.core
def test_the_fast_lane_takes_tenants_in_turn() -> None:
    flood = [_small(f"a{i}") for i in range(4)]
    mine = _small("b0")
    fake = _BlockingEngine(blocking=set(flood))
    compiles = GrammarCompiles(fake, GrammarLimits(workers=2))

    async def run() -> None:
        tasks = [asyncio.ensure_future(compiles.compile_all("a", [s])) for s in flood]
        await _until(lambda: fake.running(flood[0]))
        task = asyncio.ensure_future(compiles.compile_all("b", [mine]))
        await asyncio.sleep(0.05)
        fake.release.set()  # the flood's compiles end one by one; b's is taken right after the first
        await asyncio.wait_for(asyncio.gather(task, *tasks), WAIT_S)
        order = [s for s, fast in fake.started if fast]
        assert order.index(mine) == 1, order

    try:
        asyncio.run(run())
    finally:
        compiles.close()


@pytest.mark.core
def test_a_misjudged_small_schema_leaves_the_fast_lane_for_the_main_one() -> None:
    tricky = _small("tricky")
    fake = _BlockingEngine(exceed_fast={tricky})
    compiles = GrammarCompiles(fake, GrammarLimits(workers=2))

    async def run() -> None:
        got = await asyncio.wait_for(compiles.compile_all("a", [tricky]), WAIT_S)
        assert got[tricky].spec == tricky
        assert fake.started == [(tricky, True), (tricky, False)]  # tried fast, then with the whole budget
        assert not compiles.fast(tricky)
        await asyncio.wait_for(compiles.compile_all("a", [tricky]), WAIT_S)
        assert fake.started[2:] == [(tricky, False)]  # known slow: straight to the main lane

    try:
        asyncio.run(run())
    finally:
        compiles.close()


# ---- shutdown ------------------------------------------------------------------------------------------
@pytest.mark.core
def test_close_answers_running_and_queued_compiles_at_once_and_kills_the_running_ones() -> None:
    specs = [_large("r0"), _large("r1"), _small("q0"), _small("q1")]
    fake = _BlockingEngine(blocking=set(specs))
    compiles = GrammarCompiles(fake, GrammarLimits(workers=2))

    async def run() -> None:
        tasks = [asyncio.ensure_future(compiles.compile_all(f"t{i % 2}", [s])) for i, s in enumerate(specs)]
        await _until(lambda: fake.running(specs[0]) and fake.running(specs[2]))
        compiles.close()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_S)
        assert all(isinstance(r, PoolClosedError) for r in results), results
        assert all(c.is_set() for c in fake.cancels)  # every running compile was cancelled
        with pytest.raises(PoolClosedError):
            await compiles.compile_all("t0", [_small("late")])

    asyncio.run(run())


def _draining_server(async_engine: AsyncEngine, config: ServerConfig) -> tuple[Any, threading.Thread, str]:
    from agent_engine.server.app import build_app, draining_server

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = draining_server(build_app(async_engine, config), async_engine, "127.0.0.1", 0, "warning",
                             config.drain_timeout)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_sigterm_answers_compiling_and_queued_requests_with_503s_and_waits_for_no_compile() -> None:
    specs = [_small("s0"), _small("s1"), _large("s2")]
    fake = _BlockingEngine(blocking=set(specs))  # compiles that would run until cancelled
    async_engine = AsyncEngine(fake)
    server, thread, url = _draining_server(async_engine, ServerConfig(drain_timeout=0.5, log_level="warning"))
    answers: list[httpx.Response] = []

    def post(spec: StructuredSpec) -> None:
        body = {"prompt": "a", "max_tokens": 2, "response_format": {
            "type": "json_schema", "json_schema": {"name": "o", "schema": json.loads(str(spec.value))}}}
        answers.append(httpx.post(url + "/v1/completions", json=body, timeout=60))

    posters = [threading.Thread(target=post, args=(s,)) for s in specs]
    for p in posters:
        p.start()
    deadline = time.monotonic() + WAIT_S
    while not any(fake.running(s) for s in specs):  # then the small ones share the fast lane, s2 the main one
        assert time.monotonic() < deadline, "the compiles did not start"
        time.sleep(0.01)
    time.sleep(0.2)
    t0 = time.monotonic()
    server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
    for p in posters:
        p.join(60)
    thread.join(60)
    took = time.monotonic() - t0
    assert not thread.is_alive() and len(answers) == 3
    for r in answers:
        assert_error(r, 503, "engine_unavailable")
        assert "shutting down" in r.json()["error"]["message"]
    assert took < 5.0  # the 0.5 s drain and the exit, not a compile (none would ever end)
    assert fake.cancels and all(c.is_set() for c in fake.cancels)


# ---- a worker killed from outside --------------------------------------------------------------------
class _DyingEngine(FakeEngine):
    def compile_grammar(self, spec: Any, limits: Any, cancel: Any, fast: bool = False) -> ReadyGrammar:
        raise GrammarWorkerDied("the grammar compile worker died while compiling this output format "
                                "(killed by SIGKILL); it is restarted: retry the request")


@pytest.fixture()
def dying() -> Iterator[Any]:
    srv = start_thread_server(AsyncEngine(_DyingEngine()))
    yield srv
    srv.stop()


def test_a_compile_worker_killed_from_outside_is_a_503_to_retry(dying: Any) -> None:
    body = {"prompt": "a", "max_tokens": 2, "structured_outputs": {"regex": "[a-z]+"}}
    r = httpx.post(dying.base_url + "/v1/completions", json=body, timeout=60)
    err = assert_error(r, 503, "grammar_worker_died")
    assert "retry" in err["message"] and "malformed" not in err["message"]
    assert r.headers["retry-after"] == "1"


# ---- real compiles -------------------------------------------------------------------------------------
class _RealCompiler:
    """The two members of the engine that ``GrammarCompiles`` uses, on a real ``StructuredOutputManager``."""

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        from agent_engine.engine.structured_outputs import StructuredOutputManager
        from agent_engine.model.default_model import default_model_dir

        tok = AutoTokenizer.from_pretrained(str(default_model_dir()), local_files_only=True)
        self.manager = StructuredOutputManager(tok, len(tok), [tok.eos_token_id])

    def compile_grammar(self, spec: Any, limits: Any, cancel: threading.Event, fast: bool = False) -> ReadyGrammar:
        return self.manager.compile_checked(spec, limits, cancel, fast)

    def cached_grammar(self, spec: Any) -> ReadyGrammar | None:
        return self.manager.cached(spec)


def test_real_compiles_a_small_schema_is_served_while_two_tenants_compile_901_properties() -> None:
    real = _RealCompiler()
    compiles = GrammarCompiles(real, GrammarLimits(timeout_s=120.0, workers=2))  # type: ignore[arg-type]

    async def small(tag: str) -> float:
        t0 = time.monotonic()
        await asyncio.wait_for(compiles.compile_all("tenant-b", [_small(tag)]), WAIT_S)
        return time.monotonic() - t0

    async def run() -> None:
        await small("warm")  # starts the fast lane's worker
        quiet = sorted([await small(f"quiet{i}") for i in range(3)])[1]
        floods = [asyncio.ensure_future(compiles.compile_all(t, [_large(t)])) for t in ("tenant-a", "tenant-c")]
        await _until(lambda: compiles.pool.pending("tenant-a") and compiles.pool.pending("tenant-c"))
        await asyncio.sleep(0.5)  # both main-lane workers compile now (about 10 s each on 2 quiet cores)
        loaded = sorted([await small(f"loaded{i}") for i in range(3)])[1]
        assert not any(f.done() for f in floods)  # served while both large compiles still ran
        assert loaded <= max(2 * quiet, quiet + 0.5), (quiet, loaded)
        compiles.close()
        results = await asyncio.gather(*floods, return_exceptions=True)
        assert all(isinstance(r, PoolClosedError) for r in results), results

    try:
        asyncio.run(run())
    finally:
        compiles.close()
        real.manager.close()
