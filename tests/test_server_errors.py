"""Every error path of the API: status code and OpenAI-style body ``{"error": {message, type, param, code}}``.

Uses the shared real server (slow: it loads the real model); tests that change its state (API key,
max-waiting, a failing runner) restore it. The dead-loop test (a stand-in engine) is in
``test_server_async_engine``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from server_fixtures import assert_error, post_api, shared_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def srv():
    return shared_server()


def test_context_length_exceeded(srv):
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 5000}), 400,
                        "context_length_exceeded")
    assert "max_model_len" in err["message"]
    long_ids = [5] * 1020
    assert_error(post_api(srv, "/v1/completions", {"prompt": long_ids, "max_tokens": 10}), 400)
    assert_error(post_api(srv, "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4000}), 400)


def test_unknown_model(srv):
    err = assert_error(post_api(srv, "/v1/completions", {"model": "gpt-9", "prompt": "hi"}), 404,
                       "model_not_found")
    assert err["param"] == "model"
    assert_error(post_api(srv, "/v1/chat/completions",
                          {"model": "nope", "messages": [{"role": "user", "content": "x"}]}), 404)


def test_malformed_json_and_wrong_types(srv):
    assert_error(post_api(srv, "/v1/completions", b'{"prompt": "hi", '), 400)
    assert_error(post_api(srv, "/v1/completions", b"not json"), 400)
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": "many"}), 400)
    assert err["param"] == "max_tokens"
    assert_error(post_api(srv, "/v1/completions", {"prompt": 12}), 400)
    assert_error(post_api(srv, "/v1/completions", {"max_tokens": 3}), 400)  # missing prompt
    assert_error(post_api(srv, "/v1/chat/completions", {"messages": "hello"}), 400)
    assert_error(post_api(srv, "/v1/chat/completions", {"messages": []}), 400)
    assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "temperature": -1}), 400)
    assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "top_p": 0}), 400)


def test_out_of_vocab_and_empty_prompts(srv):
    vocab = srv.engine.vocab_size
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": [1, vocab + 5]}), 400)
    assert "vocabulary" in err["message"]
    assert_error(post_api(srv, "/v1/completions", {"prompt": [-1]}), 400)
    for empty in ("", [], [""], [[]]):
        assert_error(post_api(srv, "/v1/completions", {"prompt": empty}), 400)
    # One bad prompt in a batch rejects the whole call and leaves nothing running.
    assert_error(post_api(srv, "/v1/completions", {"prompt": [[1, 2], [vocab]]}), 400)
    assert srv.wait_idle().scheduler.blocks_in_use == 0


def test_n_greater_than_one_and_unsupported(srv):
    assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "n": 2}), 400)
    assert_error(post_api(srv, "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "x"}], "n": 3}), 400)
    assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "presence_penalty": 0.5}), 400)


def test_unknown_route_and_method(srv):
    assert_error(httpx.get(srv.base_url + "/v1/nothing", timeout=10), 404)
    assert_error(httpx.get(srv.base_url + "/v1/completions", timeout=10), 405)


def test_api_key(srv):
    srv.state.api_key = "sekret"
    try:
        assert_error(post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1}), 401,
                     "invalid_api_key")
        assert_error(post_api(srv, "/v1/completions", {"prompt": "hi"},
                              headers={"Authorization": "Bearer wrong"}), 401)
        assert_error(httpx.get(srv.base_url + "/v1/models", timeout=10), 401)
        ok = post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1},
                   headers={"Authorization": "Bearer sekret"})
        assert ok.status_code == 200
        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="wrong", max_retries=0, timeout=30)
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
        assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200  # health stays open
    finally:
        srv.state.api_key = None


def test_max_waiting_returns_503_with_retry_after(srv):
    srv.state.max_waiting = 0
    try:
        r = post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1})
        assert_error(r, 503, "server_overloaded")
        assert r.headers["retry-after"] == "1"
    finally:
        srv.state.max_waiting = None
    assert post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1}).status_code == 200


def test_failed_model_step_is_500_and_next_request_succeeds(srv, monkeypatch):
    runner = srv.engine.runner
    real_execute = runner.execute
    calls = {"n": 0}

    def flaky(out: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected fault")
        return real_execute(out)

    monkeypatch.setattr(runner, "execute", flaky)
    err = assert_error(post_api(srv, "/v1/completions", {"prompt": "fault", "max_tokens": 3}), 500,
                        "engine_step_failed")
    assert err["type"] == "internal_server_error"
    ok = post_api(srv, "/v1/completions", {"prompt": "fault", "max_tokens": 3})
    assert ok.status_code == 200 and ok.json()["choices"][0]["text"]
    # In a stream the failure is an error event, then [DONE].
    calls["n"] = 0
    with httpx.stream("POST", srv.base_url + "/v1/completions", timeout=60,
                      json={"prompt": "fault", "max_tokens": 3, "stream": True}) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert json.loads(lines[0][6:])["error"]["code"] == "engine_step_failed" and lines[-1] == "data: [DONE]"
    monkeypatch.setattr(runner, "execute", real_execute)
    assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200
    assert srv.wait_idle().scheduler.blocks_in_use == 0
