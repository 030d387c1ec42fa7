"""Concurrency, disconnects and shutdown against real servers: every KV block is free afterwards.

- 64 concurrent streamed requests with random disconnects/cancellations end with blocks_in_use == 0
  and a healthy engine.
- A client that disconnects (streamed or not) aborts its request promptly.
- SIGTERM on ``python -m agent_engine.server.serve``: in-flight streams finish, the process exits 0.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import threading
import time

import httpx
import pytest
from server_fixtures import build_engine, shared_server, start_subprocess_server

from agent_engine.server.launcher import parse_prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def srv():
    return shared_server()


async def _one(client: httpx.AsyncClient, i: int, rng: random.Random) -> str:
    mode = rng.choice(["complete", "complete", "disconnect", "cancel"])
    body = {"prompt": f"request {i}: " + "word " * rng.randint(1, 40), "max_tokens": rng.randint(2, 10),
            "temperature": rng.choice([0.0, 0.8]), "stream": True, "ignore_eos": rng.random() < 0.5,
            "stream_options": {"include_usage": True}, "job_id": f"stress-{i % 8}"}
    if mode == "cancel":
        task = asyncio.ensure_future(client.post("/v1/completions", json={**body, "max_tokens": 40}))
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, httpx.HTTPError):
            pass
        return "cancel"
    async with client.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        n = 0
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            n += 1
            if mode == "disconnect" and n >= rng.randint(1, 3):
                return "disconnect"  # leaving the context closes the connection mid-stream
            if line == "data: [DONE]":
                return "complete"
            assert "error" not in json.loads(line[6:])
    return mode


def test_64_concurrent_streams_with_disconnects_free_every_block(srv):
    async def run() -> list[str]:
        rng = random.Random(1234)
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(_one(client, i, random.Random(rng.random())) for i in range(64)))

    t0 = time.monotonic()
    results = asyncio.run(run())
    assert len(results) == 64 and {"complete", "disconnect", "cancel"} <= set(results)
    stats = srv.wait_idle(timeout=30).scheduler
    assert stats.num_running == 0 and stats.num_waiting == 0
    assert stats.blocks_in_use == 0, stats
    assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200
    r = httpx.post(srv.base_url + "/v1/completions", json={"prompt": "after", "max_tokens": 2}, timeout=60)
    assert r.status_code == 200
    assert time.monotonic() - t0 < 90


def _wait_no_running(srv, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if srv.stats().scheduler.num_running == 0:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"request still running after {timeout}s: {srv.stats()}")


def test_stream_disconnect_aborts_promptly(srv):
    body = {"prompt": "long story", "max_tokens": 900, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", srv.base_url + "/v1/completions", json=body, timeout=60) as r:
        seen = 0
        for line in r.iter_lines():
            if line.startswith("data: "):
                seen += 1
                if seen == 3:
                    break
    assert _wait_no_running(srv, 5.0) < 5.0
    assert srv.wait_idle().scheduler.blocks_in_use == 0


def test_non_stream_disconnect_aborts(srv):
    body = {"prompt": "another long story", "max_tokens": 900, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(srv.base_url + "/v1/completions", json=body, timeout=httpx.Timeout(60, read=1.0))
    assert _wait_no_running(srv, 5.0) < 5.0
    assert srv.wait_idle().scheduler.blocks_in_use == 0
    assert 'finish_reason="abort"' in httpx.get(srv.base_url + "/metrics", timeout=10).text


def test_sigterm_drains_in_flight_and_exits_zero(tmp_path):
    proc = start_subprocess_server(
        ["--num-kv-blocks", "256", "--max-model-len", "512", "--drain-timeout", "20"], tmp_path / "serve.log")
    try:
        lines: list[str] = []
        first = threading.Event()

        def stream() -> None:
            body = {"prompt": "drain me", "max_tokens": 40, "ignore_eos": True, "stream": True}
            with httpx.stream("POST", proc.base_url + "/v1/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        lines.append(line)
                        first.set()

        t = threading.Thread(target=stream)
        t.start()
        assert first.wait(30)
        rc = proc.stop(timeout=60)
        t.join(30)
        assert rc == 0, proc.log_tail()
        assert lines[-1] == "data: [DONE]"
        finishes = [json.loads(x[6:])["choices"][0]["finish_reason"] for x in lines[:-1]]
        assert finishes[-1] == "length"  # the in-flight request ran to completion
        with pytest.raises(httpx.ConnectError):
            httpx.get(proc.base_url + "/health", timeout=2)
    finally:
        proc.stop(timeout=5)


def test_sigterm_past_the_drain_timeout_ends_every_call_cleanly(tmp_path):
    """Streams longer than the drain end with finish_reason "abort" and [DONE]; a plain request gets a
    JSON error; a request after SIGTERM is refused; pins are released and counted; exit 0."""
    proc = start_subprocess_server(
        ["--num-kv-blocks", "256", "--max-model-len", "1024", "--drain-timeout", "1", "--policy", "continuum",
         "--ttl-policy", "fixed", "--pin-threshold", "600"], tmp_path / "serve.log")
    try:
        pin = {"prompt": "pinned job turn " * 20, "max_tokens": 2, "job_id": "pinned", "tool_name": "bash:ls"}
        assert httpx.post(proc.base_url + "/v1/completions", json=pin, timeout=60).status_code == 200
        lines: list[str] = []
        plain: list[httpx.Response] = []
        first = threading.Event()
        long_body = {"prompt": "a very long story", "max_tokens": 1000, "ignore_eos": True}

        def stream() -> None:
            with httpx.stream("POST", proc.base_url + "/v1/completions", json={**long_body, "stream": True},
                              timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        lines.append(line)
                        first.set()

        threads = [threading.Thread(target=stream),
                   threading.Thread(target=lambda: plain.append(
                       httpx.post(proc.base_url + "/v1/completions", json=long_body, timeout=60)))]
        for t in threads:
            t.start()
        assert first.wait(30)
        deadline = time.monotonic() + 30
        while parse_prometheus(httpx.get(proc.base_url + "/metrics", timeout=10).text).get(
                "agent_engine_requests_running", 0) < 2:  # both long requests are in flight
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.HTTPError):  # refused: 503 while draining, or the socket is closed
            r = httpx.post(proc.base_url + "/v1/completions", json={"prompt": "late"}, timeout=5)
            r.raise_for_status()
        for t in threads:
            t.join(30)
        rc = proc.proc.wait(30)
        assert rc == 0, proc.log_tail()
        assert lines[-1] == "data: [DONE]"
        assert json.loads(lines[-2][6:])["choices"][0]["finish_reason"] == "abort"
        assert plain and plain[0].status_code == 503 and plain[0].json()["error"]["code"] == "aborted"
    finally:
        proc.stop(timeout=5)


def test_shutdown_releases_and_counts_every_pin():
    from agent_engine.server.async_engine import AsyncEngine, RequestSpec
    from scheduler import JobHints, SamplingParams

    engine = AsyncEngine(build_engine(policy="continuum", ttl_policy="fixed", pin_threshold=600.0)).start()

    async def pin_one() -> None:
        group = engine.submit([RequestSpec("t1", "a pinned turn " * 20, SamplingParams(max_tokens=2),
                                           hints=JobHints.for_job("j", tool_name="bash:ls"))])
        await group.accepted()
        assert [ev async for ev in group.events() if ev.finished]

    asyncio.run(pin_one())
    assert engine.stats_sync().scheduler.num_pinned_jobs == 1
    engine.shutdown(drain_timeout=0)
    stats = engine.engine.stats().scheduler  # the loop has stopped: safe to read from here
    assert stats.pins.released == 1 and stats.num_pinned_jobs == 0 and stats.blocks_in_use == 0
