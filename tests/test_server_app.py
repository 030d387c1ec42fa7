"""The app on ``FakeEngine`` (pure Python, no model): every route, streamed and not, the error paths,
auth and admission from ``ServerConfig``, and client disconnects.

Fast: in-thread uvicorn servers on 127.0.0.1; the slow files repeat the HTTP checks on the real model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixtures import (
    LETTERS,
    FakeEngine,
    ThreadServer,
    assert_error,
    post_api,
    start_thread_server,
)

from agent_engine.server import AsyncEngine, ServerConfig
from agent_engine.server.metrics import PIN_COUNTER_NAMES

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]

MAX_MODEL_LEN = 64


@pytest.fixture(scope="module")
def srv() -> Iterator[ThreadServer]:
    server = start_thread_server(AsyncEngine(FakeEngine(max_model_len=MAX_MODEL_LEN)))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def slow_srv() -> Iterator[ThreadServer]:
    """Long requests take real time here (10 ms a token), for disconnect tests."""
    server = start_thread_server(AsyncEngine(FakeEngine(max_model_len=10**6, step_delay=0.01)))
    yield server
    server.stop()


def _ids(text: str) -> list[int]:
    return [ord(c) % 26 for c in text]


def _sse(lines: Iterator[str]) -> list[Any]:
    return [ln[6:] if ln == "data: [DONE]" else json.loads(ln[6:]) for ln in lines if ln.startswith("data: ")]


def _stream(srv: ThreadServer, path: str, body: dict[str, Any]) -> list[Any]:
    with httpx.stream("POST", srv.base_url + path, json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return _sse(r.iter_lines())


def _wait_until(cond: Any, timeout: float = 5.0) -> float:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "condition not met in time"
        time.sleep(0.01)
    return time.monotonic() - t0


def test_models_health_and_metrics(srv):
    models = httpx.get(srv.base_url + "/v1/models", timeout=10).json()
    assert models["object"] == "list"
    assert [(m["id"], m["max_model_len"], m["root"]) for m in models["data"]] == [
        ("fake-model", MAX_MODEL_LEN, "fake-model")]
    r = httpx.get(srv.base_url + "/health", timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = httpx.get(srv.base_url + "/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    pins = [f"agent_engine_pins_{k}_total" for k in PIN_COUNTER_NAMES]
    for name in ["agent_engine_requests_running", "agent_engine_kv_blocks_total",
                 "agent_engine_failed_steps_total", "agent_engine_pinned_block_seconds_total", *pins]:
        assert name in r.text, name


def test_completion_body_usage_token_ids_and_job_hints(srv):
    r = post_api(srv, "/v1/completions", {"prompt": "hello", "max_tokens": 5, "return_token_ids": True},
                 headers={"X-Session-Id": "sess"})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "text_completion" and body["model"] == "fake-model"
    assert body["id"].startswith("cmpl-") and body["job_id"] == "sess"
    choice = body["choices"][0]
    assert choice["text"] == FakeEngine.expected_text(_ids("hello"), 5)
    assert choice["finish_reason"] == "length" and choice["logprobs"] is None and choice["index"] == 0
    assert choice["token_ids"] == [LETTERS.index(c) for c in choice["text"]]
    assert choice["prompt_token_ids"] == _ids("hello")
    assert body["prompt_token_ids"] == _ids("hello")
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    default = post_api(srv, "/v1/completions", {"prompt": "x", "job_id": "body"}, headers={"X-Job-Id": "hdr"})
    assert default.json()["job_id"] == "body" and default.json()["usage"]["completion_tokens"] == 16
    assert "job_id" not in post_api(srv, "/v1/completions", {"prompt": "x", "max_tokens": 1}).json()


def test_several_prompts_streamed_and_not(srv):
    prompts = ["ab", "fg", "cde"]
    body = post_api(srv, "/v1/completions", {"prompt": prompts, "max_tokens": 3}).json()
    want = [FakeEngine.expected_text(_ids(p), 3) for p in prompts]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert [c["text"] for c in body["choices"]] == want
    events = _stream(srv, "/v1/completions", {"prompt": prompts, "max_tokens": 3})
    assert events[-1] == "[DONE]"
    texts = ["", "", ""]
    for e in events[:-1]:
        texts[e["choices"][0]["index"]] += e["choices"][0]["text"]
    assert texts == want
    finished = [e["choices"][0]["index"] for e in events[:-1] if e["choices"][0]["finish_reason"]]
    assert sorted(finished) == [0, 1, 2]
    by_ids = post_api(srv, "/v1/completions", {"prompt": [[3, 4], [5]], "max_tokens": 2}).json()
    want = [FakeEngine.expected_text([4], 2), FakeEngine.expected_text([5], 2)]
    assert [c["text"] for c in by_ids["choices"]] == want


def test_completion_stream_equals_non_stream(srv):
    body = {"prompt": "stream me", "max_tokens": 6, "return_token_ids": True,
            "stream_options": {"include_usage": True}}
    full = post_api(srv, "/v1/completions", body).json()
    events = _stream(srv, "/v1/completions", body)
    assert events[-1] == "[DONE]"
    usage, chunks = events[-2], events[:-2]
    assert usage["choices"] == [] and usage["usage"] == full["usage"] and usage["object"] == "text_completion"
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["choices"][0]["text"]
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == full["choices"][0]["token_ids"]
    assert chunks[0]["choices"][0]["prompt_token_ids"] == _ids("stream me")
    assert all("prompt_token_ids" not in c["choices"][0] for c in chunks[1:])
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["length"]
    assert len({c["id"] for c in chunks}) == 1 and all(c["object"] == "text_completion" for c in chunks)
    no_usage = _stream(srv, "/v1/completions", {"prompt": "stream me", "max_tokens": 2})
    assert len(no_usage) == 3 and all(e == "[DONE]" or e["choices"] for e in no_usage)


def test_chat_body_stream_and_filled_max_tokens(srv):
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    prompt = "system:be brief;user:hi;assistant:"
    body = post_api(srv, "/v1/chat/completions", {"messages": messages, "max_completion_tokens": 4,
                                                   "max_tokens": 9, "session_id": "s1"}).json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["job_id"] == "s1"
    text = FakeEngine.expected_text(_ids(prompt), 4)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": text}
    events = _stream(srv, "/v1/chat/completions", {"messages": messages, "max_tokens": 4,
                                                    "return_token_ids": True,
                                                    "stream_options": {"include_usage": True}})
    chunks = events[:-2]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:])
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == text
    assert chunks[0]["prompt_token_ids"] == _ids(prompt)
    assert all("prompt_token_ids" not in c for c in chunks[1:])
    assert events[-2]["object"] == "chat.completion.chunk" and events[-2]["usage"]["completion_tokens"] == 4
    # No max_tokens: the request may fill the context (vLLM's behaviour).
    filled = post_api(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}).json()
    assert filled["usage"]["completion_tokens"] == MAX_MODEL_LEN - len("user:x;assistant:")


def test_logprobs(srv):
    body = post_api(srv, "/v1/completions", {"prompt": "lp", "max_tokens": 4, "logprobs": 2}).json()
    lp = body["choices"][0]["logprobs"]
    assert "".join(lp["tokens"]) == body["choices"][0]["text"] and lp["text_offset"] == [0, 1, 2, 3]
    assert lp["token_logprobs"] == [-0.5] * 4 and all(len(t) == 2 for t in lp["top_logprobs"])
    events = _stream(srv, "/v1/completions", {"prompt": "lp", "max_tokens": 4, "logprobs": 0})
    assert [e["choices"][0]["logprobs"]["text_offset"] for e in events[:-1]] == [[0], [1], [2], [3]]
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "logprobs": True,
            "top_logprobs": 3}
    chat = post_api(srv, "/v1/chat/completions", body).json()
    content = chat["choices"][0]["logprobs"]["content"]
    assert "".join(c["token"] for c in content) == chat["choices"][0]["message"]["content"]
    assert all(len(c["top_logprobs"]) == 3 and c["bytes"] == list(c["token"].encode()) for c in content)


def test_request_errors(srv):
    err = assert_error(post_api(srv, "/v1/completions", {"model": "gpt-9", "prompt": "x"}), 404,
                       "model_not_found")
    assert err["param"] == "model" and err["type"] == "not_found_error"
    for empty in ("", [], [""], [[]]):
        assert assert_error(post_api(srv, "/v1/completions", {"prompt": empty}), 400)["param"] == "prompt"
    assert_error(post_api(srv, "/v1/completions", b'{"prompt": '), 400)
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": "x", "max_tokens": "many"}), 400,
                       "invalid_request")
    assert err["param"] == "max_tokens"
    assert_error(post_api(srv, "/v1/completions", {"prompt": "x", "n": 2}), 400)
    assert_error(post_api(srv, "/v1/completions", {"prompt": "x", "max_tokens": 100}), 400,
                 "context_length_exceeded")
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": [[1, 2], [30]]}), 400, "invalid_request")
    assert "vocabulary" in err["message"]
    bad_part = {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}
    assert assert_error(post_api(srv, "/v1/chat/completions", bad_part), 400)["param"] == "messages"
    assert_error(post_api(srv, "/v1/chat/completions", {"messages": []}), 400)
    assert_error(httpx.get(srv.base_url + "/v1/nothing", timeout=10), 404, "not_found")
    assert_error(httpx.get(srv.base_url + "/v1/completions", timeout=10), 405)
    assert srv.wait_idle().scheduler.num_running == 0 and srv.async_engine.num_queued() == 0


def test_failed_step_is_500_or_an_error_event(srv):
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": "FAIL", "max_tokens": 3}), 500,
                       "engine_step_failed")
    assert err["type"] == "internal_server_error"
    events = _stream(srv, "/v1/completions", {"prompt": "FAIL", "stream_options": {"include_usage": True}})
    assert events[0]["error"]["code"] == "engine_step_failed" and events[0]["error"]["status_code"] == 500
    assert events[1:] == ["[DONE]"]
    assert post_api(srv, "/v1/completions", {"prompt": "ok", "max_tokens": 2}).status_code == 200


def test_job_release_and_its_metrics(srv):
    post_api(srv, "/v1/completions", {"prompt": "turn", "max_tokens": 1, "job_id": "job-r"})
    r = httpx.delete(srv.base_url + "/v1/jobs/job-r", timeout=10)
    assert r.status_code == 200
    assert r.json() == {"id": "job-r", "object": "job", "deleted": True, "released_pin": True}
    gone = httpx.delete(srv.base_url + "/v1/jobs/job-r", timeout=10)  # over now: unknown
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "job_not_found"
    text = httpx.get(srv.base_url + "/metrics", timeout=10).text
    assert "agent_engine_jobs_released_total" in text and 'job_id="job-r"' not in text


def test_api_key_and_admission_from_server_config():
    config = ServerConfig(api_keys=("k",), max_waiting=0, drain_timeout=1.0, log_level="warning")
    server = start_thread_server(AsyncEngine(FakeEngine()), config)
    try:
        assert server.state.api_key == "k" and server.state.max_waiting == 0
        assert_error(post_api(server, "/v1/completions", {"prompt": "x"}), 401, "invalid_api_key")
        bad = {"Authorization": "Bearer nope"}
        assert_error(httpx.get(server.base_url + "/v1/models", headers=bad, timeout=10), 401,
                     "invalid_api_key")
        good = {"Authorization": "Bearer k"}
        assert httpx.get(server.base_url + "/v1/models", headers=good, timeout=10).status_code == 200
        r = post_api(server, "/v1/completions", {"prompt": "x"}, headers=good)
        assert_error(r, 503, "server_overloaded")
        assert r.headers["retry-after"] == "1"
        assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200  # stays open
        assert httpx.get(server.base_url + "/metrics", timeout=10).status_code == 401  # behind the key
        assert httpx.get(server.base_url + "/metrics", headers=good, timeout=10).status_code == 200
        server.state.open_metrics = True
        assert httpx.get(server.base_url + "/metrics", timeout=10).status_code == 200
        server.state.max_waiting = None
        assert post_api(server, "/v1/completions", {"prompt": "x"}, headers=good).status_code == 200
    finally:
        server.stop()


def test_stream_disconnect_aborts_promptly(slow_srv):
    with httpx.stream("POST", slow_srv.base_url + "/v1/completions", timeout=30,
                      json={"prompt": "long", "max_tokens": 5000, "stream": True}) as r:
        seen = 0
        for line in r.iter_lines():
            seen += line.startswith("data: ")
            if seen == 3:
                break
    assert _wait_until(lambda: slow_srv.stats().scheduler.num_running == 0) < 5.0
    assert 'finish_reason="abort"' in httpx.get(slow_srv.base_url + "/metrics", timeout=10).text


def test_non_stream_disconnect_aborts(slow_srv):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(slow_srv.base_url + "/v1/completions", json={"prompt": "long", "max_tokens": 5000},
                   timeout=httpx.Timeout(30, read=0.3))
    assert _wait_until(lambda: slow_srv.stats().scheduler.num_running == 0) < 5.0
    assert slow_srv.async_engine.num_queued() == 0
