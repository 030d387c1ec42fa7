"""Every error path of the API: status code and OpenAI-style body ``{"error": {message, type, param, code}}``.

Uses the shared real server; tests that change its state (API key, max-waiting, a failing runner)
restore it. The dead-loop test uses a tiny stand-in engine whose ``step`` raises (no model needed).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from server_fixtures import shared_server, start_thread_server

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def srv():
    return shared_server()


def _assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["message"]
    if code is not None:
        assert err["code"] == code
    return err


def _post(srv, path: str, body: Any, **kw: Any) -> httpx.Response:
    if isinstance(body, (dict, list)):
        return httpx.post(srv.base_url + path, json=body, timeout=60, **kw)
    return httpx.post(srv.base_url + path, content=body, timeout=60,
                      headers={"content-type": "application/json", **kw.pop("headers", {})}, **kw)


def test_context_length_exceeded(srv):
    err = _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 5000}), 400,
                        "context_length_exceeded")
    assert "max_model_len" in err["message"]
    long_ids = [5] * 1020
    _assert_error(_post(srv, "/v1/completions", {"prompt": long_ids, "max_tokens": 10}), 400)
    _assert_error(_post(srv, "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4000}), 400)


def test_unknown_model(srv):
    err = _assert_error(_post(srv, "/v1/completions", {"model": "gpt-9", "prompt": "hi"}), 404, "model_not_found")
    assert err["param"] == "model"
    _assert_error(_post(srv, "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user",
                                                                                       "content": "x"}]}), 404)


def test_malformed_json_and_wrong_types(srv):
    _assert_error(_post(srv, "/v1/completions", b'{"prompt": "hi", '), 400)
    _assert_error(_post(srv, "/v1/completions", b"not json"), 400)
    err = _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": "many"}), 400)
    assert err["param"] == "max_tokens"
    _assert_error(_post(srv, "/v1/completions", {"prompt": 12}), 400)
    _assert_error(_post(srv, "/v1/completions", {"max_tokens": 3}), 400)  # missing prompt
    _assert_error(_post(srv, "/v1/chat/completions", {"messages": "hello"}), 400)
    _assert_error(_post(srv, "/v1/chat/completions", {"messages": []}), 400)
    _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "temperature": -1}), 400)
    _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "top_p": 0}), 400)


def test_out_of_vocab_and_empty_prompts(srv):
    vocab = srv.engine.vocab_size
    err = _assert_error(_post(srv, "/v1/completions", {"prompt": [1, vocab + 5]}), 400)
    assert "vocabulary" in err["message"]
    _assert_error(_post(srv, "/v1/completions", {"prompt": [-1]}), 400)
    for empty in ("", [], [""], [[]]):
        _assert_error(_post(srv, "/v1/completions", {"prompt": empty}), 400)
    # One bad prompt in a batch rejects the whole call and leaves nothing running.
    _assert_error(_post(srv, "/v1/completions", {"prompt": [[1, 2], [vocab]]}), 400)
    assert srv.wait_idle()["blocks_in_use"] == 0


def test_n_greater_than_one_and_unsupported(srv):
    _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "n": 2}), 400)
    _assert_error(_post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 3}), 400)
    _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "presence_penalty": 0.5}), 400)


def test_unknown_route_and_method(srv):
    _assert_error(httpx.get(srv.base_url + "/v1/nothing", timeout=10), 404)
    _assert_error(httpx.get(srv.base_url + "/v1/completions", timeout=10), 405)


def test_api_key(srv):
    srv.state.api_key = "sekret"
    try:
        _assert_error(_post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1}), 401, "invalid_api_key")
        _assert_error(_post(srv, "/v1/completions", {"prompt": "hi"}, headers={"Authorization": "Bearer wrong"}),
                      401)
        _assert_error(httpx.get(srv.base_url + "/v1/models", timeout=10), 401)
        ok = _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1},
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
        r = _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1})
        _assert_error(r, 503, "server_overloaded")
        assert r.headers["retry-after"] == "1"
    finally:
        srv.state.max_waiting = None
    assert _post(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1}).status_code == 200


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
    err = _assert_error(_post(srv, "/v1/completions", {"prompt": "fault", "max_tokens": 3}), 500,
                        "engine_step_failed")
    assert err["type"] == "internal_server_error"
    ok = _post(srv, "/v1/completions", {"prompt": "fault", "max_tokens": 3})
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
    assert srv.wait_idle()["blocks_in_use"] == 0


class _DyingEngine:
    """Stand-in engine whose loop crashes on the first step that has work (tests the dead-loop path)."""

    model_name = "stand-in"
    max_model_len = 64
    vocab_size = 10

    def __init__(self) -> None:
        self.reqs: list[str] = []

    def add_request(self, request_id: str, prompt: Any, params: Any, **_: Any) -> None:
        self.reqs.append(request_id)

    def has_unfinished_requests(self) -> bool:
        return bool(self.reqs)

    def step(self) -> list[Any]:
        if self.reqs:
            time.sleep(0.2)
            raise SystemError("the engine loop crashed")
        return []

    def abort(self, ids: Any) -> None:
        self.reqs = [r for r in self.reqs if r not in set(ids)]

    def stats(self) -> dict[str, Any]:
        return {"num_running": len(self.reqs), "num_waiting": 0}


def test_dead_loop_fails_pending_and_health_503():
    from agent_engine.server.async_engine import AsyncEngine

    dying = start_thread_server(AsyncEngine(_DyingEngine()))
    try:
        assert httpx.get(dying.base_url + "/health", timeout=10).status_code == 200
        err = _assert_error(httpx.post(dying.base_url + "/v1/completions", json={"prompt": "x"}, timeout=30), 500)
        assert "died" in err["message"]
        err = _assert_error(httpx.get(dying.base_url + "/health", timeout=10), 503, "unhealthy")
        assert "SystemError" in err["message"]
        _assert_error(httpx.post(dying.base_url + "/v1/completions", json={"prompt": "x"}, timeout=30), 503)
        assert httpx.get(dying.base_url + "/metrics", timeout=10).status_code == 200
    finally:
        dying.stop()
