"""A hostile tenant with a valid key: every request it can send is bounded before it reaches what other
tenants share, answered with a 4xx (never a 500), and leaves no state behind. One server, two keys."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from sched_helpers import make_request, pinning, run_step
from server_fixtures import build_engine, start_thread_server

from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.server_config import ServerConfig
from agent_engine.server.tokenizer_pool import FairTokenizerPool
from estimator.durations import DurationHistory
from scheduler import FakeClock, FakeRunner, SamplingParams, Scheduler, SchedulerConfig
from scheduler.job_index import JobIndex

pytestmark = [pytest.mark.timeout(300)]

A, B = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
MODEL = "agent-engine-default"
CAP = 3  # requests one tenant may have in flight


@pytest.fixture(scope="module")
def srv():
    config = ServerConfig(api_keys=("key-a", "key-b"), drain_timeout=2.0, log_level="warning",
                          tenant_max_requests=CAP, max_prompts=16, header_timeout=1.0, body_timeout=1.5)
    server = start_thread_server(AsyncEngine(build_engine(policy="continuum")), config)
    yield server
    server.stop()


def _post(srv, path: str, body, headers=A, **kw) -> httpx.Response:
    return httpx.post(srv.base_url + path, json=body, headers=headers, timeout=60, **kw)


def _chat(**extra) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **extra}


def _deep_dict(depth: int) -> dict:
    root = cur = {}
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return root


def test_a_user_id_nested_5000_deep_is_an_opaque_session_not_a_500(srv):
    user_id = "{" + '"a":{' * 5000 + "}" * 5001
    for path, body in (("/v1/chat/completions", _chat(metadata={"user_id": user_id})),
                       ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "metadata": {"user_id": user_id}}),
                       ("/v1/messages", {"model": MODEL, **_chat(metadata={"user_id": user_id})})):
        r = _post(srv, path, body)
        assert r.status_code == 200, (path, r.text[:200])


def test_deep_message_extras_are_refused_and_shallow_ones_never_reach_the_template(srv):
    r = _post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi", "x": _deep_dict(900)}],
                                           "max_tokens": 2})
    assert r.status_code == 400 and "nested deeper than 64" in r.json()["error"]["message"]
    r = _post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi", "x": _deep_dict(20)}],
                                           "max_tokens": 2})
    assert r.status_code == 200


def test_hint_strings_are_bounded_and_the_tool_history_forgets_old_tools(srv):
    r = _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "job_id": "j", "tool_name": "x" * 1_000_000})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_hint"
    r = _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "cache_salt": "s" * 300})
    assert r.status_code == 400
    history = DurationHistory(max_tools=3)
    for i in range(10):
        history.add(f"tool-{i}", 1.0)
    assert history.tools() == ["tool-7", "tool-8", "tool-9"] and history.count(None) == 10


def test_a_10mb_prompt_is_refused_before_tokenization(srv):
    started = time.monotonic()
    for path, body in (("/v1/completions", {"prompt": "word " * 2_000_000, "max_tokens": 2}),
                       ("/v1/messages/count_tokens", {"model": MODEL, "messages": [
                           {"role": "user", "content": "word " * 2_000_000}]})):
        r = _post(srv, path, body)
        assert r.status_code == 400 and "max_model_len" in r.text, r.text[:200]
    assert time.monotonic() - started < 5.0  # tokenizing 10 MB alone takes seconds


def test_one_tenants_slow_preparation_leaves_a_worker_to_the_others():
    async def scenario() -> None:
        pool = FairTokenizerPool(workers=2)
        gate = threading.Event()
        order: list[str] = []
        try:
            slow = asyncio.ensure_future(pool.run("a", lambda: (gate.wait(10), order.append("a1"))))
            queued = asyncio.ensure_future(pool.run("a", lambda: order.append("a2")))
            await asyncio.sleep(0.1)
            await asyncio.wait_for(pool.run("b", lambda: order.append("b1")), 2.0)  # not behind a's work
            assert order == ["b1"] and pool.pending("a") == 2  # a's second job waits for its first
            gate.set()
            await asyncio.wait_for(asyncio.gather(slow, queued), 5.0)
            assert order == ["b1", "a1", "a2"]
        finally:
            gate.set()
            pool.shutdown()

    asyncio.run(scenario())


def test_a_batch_is_bounded_and_a_flooding_tenant_gets_429_while_others_are_served(srv):
    r = _post(srv, "/v1/completions", {"prompt": ["hi"] * 20_000, "max_tokens": 2})
    assert r.status_code == 400 and r.json()["error"]["code"] == "too_many_prompts"

    async def flood() -> None:
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=60) as client:
            # A holds its whole share with streams it never reads.
            streams = [client.stream("POST", "/v1/completions", headers=A,
                                     json={"prompt": f"stream {i}", "max_tokens": 300, "stream": True,
                                           "ignore_eos": True}) for i in range(CAP)]
            opened = [await s.__aenter__() for s in streams]
            try:
                more = await client.post("/v1/completions", headers=A, json={"prompt": "one more", "max_tokens": 2})
                assert more.status_code == 429 and more.headers["retry-after"]
                assert more.json()["error"]["code"] == "rate_limit_exceeded"
                started = time.monotonic()
                other = await client.post("/v1/completions", headers=B, json={"prompt": "hello", "max_tokens": 2})
                assert other.status_code == 200 and time.monotonic() - started < 10
            finally:
                for s, resp in zip(streams, opened, strict=True):
                    await s.__aexit__(None, None, None)
                    assert resp.status_code == 200

    asyncio.run(flood())
    deadline = time.monotonic() + 30
    while srv.state.inflight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.state.inflight == {}  # every seat came back
    assert _post(srv, "/v1/completions", {"prompt": "again", "max_tokens": 2}).status_code == 200


def test_a_job_id_with_a_slash_can_be_released(srv):
    prompt = "a turn of a team job " * 8
    assert _post(srv, "/v1/completions", {"prompt": prompt, "max_tokens": 2, "job_id": "team/job-1"}).status_code == 200
    r = httpx.delete(srv.base_url + "/v1/jobs/team/job-1", headers=A, timeout=30)
    assert r.status_code == 200 and r.json()["id"] == "team/job-1"
    assert httpx.delete(srv.base_url + "/v1/jobs/team/job-1", headers=A, timeout=30).status_code == 404


def test_a_near_zero_temperature_is_greedy(srv):
    body = {"prompt": "the greedy answer", "max_tokens": 6, "ignore_eos": True}
    greedy = _post(srv, "/v1/completions", {**body, "temperature": 0}).json()["choices"][0]["text"]
    tiny = _post(srv, "/v1/completions", {**body, "temperature": 1e-38}).json()["choices"][0]
    assert tiny["text"] == greedy and tiny["finish_reason"] == "length"
    assert SamplingParams(temperature=1e-6).greedy and not SamplingParams(temperature=1e-4).greedy


def test_inferred_job_ids_cannot_be_guessed(srv):
    index = JobIndex(block_size=4)
    ids = {index.new_job_id() for _ in range(100)}
    assert len(ids) == 100 and "inferred-0" not in ids and all(len(i) == len("inferred-") + 16 for i in ids)
    for guess in ("inferred-0", "inferred-1"):
        assert httpx.delete(srv.base_url + f"/v1/jobs/{guess}", headers=B, timeout=30).status_code == 404


def test_fields_the_server_cannot_honour_are_refused_by_name(srv):
    r = _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "best_of": 3})
    assert r.status_code == 400 and "best_of" in r.json()["error"]["message"]
    for field, value in (("mcp_servers", [{"type": "url", "url": "http://x"}]), ("container", "c-1")):
        r = _post(srv, "/v1/messages", {"model": MODEL, **_chat(**{field: value})})
        assert r.status_code == 400 and field in r.json()["error"]["message"], r.text
    r = httpx.post(srv.base_url + "/v1/completions", content=b'{"prompt": "hi", "max_tokens": 2}',
                   headers={**A, "Content-Type": "text/plain"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_content_type"
    assert "text/plain" in r.json()["error"]["message"]
    r = httpx.post(srv.base_url + "/v1/completions", content=b'{"prompt": "hi", "max_tokens": 2}', headers=A, timeout=30)
    assert r.status_code == 200  # no Content-Type: read as JSON


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(1024):
            pass
        return True
    except TimeoutError:
        return False


def test_slow_headers_are_cut_and_a_trickled_body_is_a_408(srv):
    port = int(srv.base_url.rsplit(":", 1)[1])
    idle, partial = socket.create_connection(("127.0.0.1", port)), socket.create_connection(("127.0.0.1", port))
    partial.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    assert _closed_within(idle, 5.0) and _closed_within(partial, 5.0)
    trickle = socket.create_connection(("127.0.0.1", port))
    trickle.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-a\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    trickle.settimeout(5.0)
    assert b" 408 " in trickle.recv(4096).split(b"\r\n")[0] + b" "
    for s in (idle, partial, trickle):
        s.close()
    assert _post(srv, "/v1/completions", {"prompt": "still fine", "max_tokens": 2}).status_code == 200


def test_a_prefix_shared_by_two_pinned_jobs_counts_once_in_the_pinned_blocks():
    clock = FakeClock()
    s = Scheduler(SchedulerConfig(num_blocks=33, block_size=4, max_model_len=64, policy="continuum"),
                  clock=clock, estimator=pinning(lambda r: 30.0))
    runner = FakeRunner()
    shared = list(range(8))  # two whole blocks both jobs' prompts start with
    for job, tail in (("j1", [100, 101, 102, 103]), ("j2", [200, 201, 202, 203])):
        s.add_request(make_request(f"{job}-t1", shared + tail, 4, job_id=job))
        while s.requests:  # j2 starts once j1's blocks are cached: it reuses the shared two
            run_step(s, runner)
    stats = s.stats()
    assert stats.num_pinned_jobs == 2 and stats.pin_block_refs == 6  # the cap counts 3 + 3
    assert stats.blocks_pinned == 4 == stats.blocks_in_use  # the pool holds 2 shared + 1 + 1



def _pool_filled_by_one_tenant(tenants: tuple[str | None, str | None]) -> Scheduler:
    """Tenant ``tenants[0]``'s four long requests fill the pool; then ``tenants[1]`` sends a short one."""
    s = Scheduler(SchedulerConfig(num_blocks=33, block_size=4, max_model_len=64, max_num_seqs=8, policy="fcfs"),
                  clock=FakeClock())
    runner = FakeRunner()
    for i in range(4):
        s.add_request(make_request(f"a{i}", [i * 50 + k for k in range(24)], 24, tenant=tenants[0]))
    while s.kv.pool.num_free_blocks >= 3:
        run_step(s, runner)
    s.add_request(make_request("b0", [900 + k for k in range(10)], 4, tenant=tenants[1]))
    run_step(s, runner)
    return s


def test_a_tenant_over_its_share_of_the_pool_gives_way_to_one_within_it():
    fair = _pool_filled_by_one_tenant(("a", "b"))
    assert "b0" in [r.request_id for r in fair.running] and fair.num_preemptions == 1
    assert fair.requests["a3"].status.name == "PREEMPTED"  # the over-share tenant's latest request
    one_tenant = _pool_filled_by_one_tenant((None, None))  # no tenants: first come, first served
    assert "b0" not in [r.request_id for r in one_tenant.running] and one_tenant.num_preemptions == 0
