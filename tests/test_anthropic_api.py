"""The Anthropic Messages API on ``FakeEngine`` (no model): bodies and usage, the streamed event sequence,
validation and other errors in Anthropic's shape, count_tokens, max_tokens capping, auth headers and
job hints. Conversion and stream assembly without a server: ``test_anthropic_convert``.

Fast: in-thread uvicorn servers on 127.0.0.1; ``test_anthropic_sdk.py`` repeats the round trips with the
official SDK on real models.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixtures import FakeEngine, ThreadServer, post_api, start_thread_server

from agent_engine.engine.engine_request import EngineRequest
from agent_engine.server import AsyncEngine

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]

MODEL = FakeEngine.model_name
MAX_MODEL_LEN = 1024
TOOL = {"name": "get_weather", "description": "Weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


class RecordingEngine(FakeEngine):
    """A FakeEngine that keeps the job hints (as a dict) of every request it was given."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.added: list[dict[str, Any]] = []

    def add_request(self, request: EngineRequest) -> None:
        super().add_request(request)
        self.added.append({"request": request, "params": request.params, **dataclasses.asdict(request.hints)})


@pytest.fixture(scope="module")
def srv() -> Iterator[ThreadServer]:
    server = start_thread_server(AsyncEngine(RecordingEngine(max_model_len=MAX_MODEL_LEN)))
    yield server
    server.stop()


def _body(**kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **kw}


def _anthropic_error(r: httpx.Response, status: int, err_type: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert body["error"]["type"] == err_type and body["error"]["message"]
    return body["error"]["message"]


def _events(srv: ThreadServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of a streamed call; every event has both lines."""
    with httpx.stream("POST", srv.base_url + "/v1/messages", json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = []
    for chunk in raw.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line[6:])
        assert data["type"] == name_line[7:]
        events.append((name_line[7:], data))
    return events


# ---- the server -----------------------------------------------------------------------------------

def test_message_body_and_usage(srv):
    r = post_api(srv, "/v1/messages", _body(max_tokens=4))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"].startswith("msg_") and body["type"] == "message" and body["role"] == "assistant"
    assert body["model"] == MODEL and body["stop_reason"] == "max_tokens" and body["stop_sequence"] is None
    prompt_ids = list(srv.engine.added[-1]["request"].prompt_token_ids)
    assert body["content"] == [{"type": "text", "text": FakeEngine.expected_text(prompt_ids, 4)}]
    assert body["usage"] == {"input_tokens": len(prompt_ids), "output_tokens": 4,
                             "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def test_client_options_without_effect_are_accepted(srv):
    """Claude Code sends these: thinking (no reasoning channel here), effort, cache marks, unknown fields."""
    body = _body(thinking={"type": "enabled", "budget_tokens": 1024}, output_config={"effort": "high"},
                 cache_control={"type": "ephemeral"}, context_management={"edits": []},
                 system=[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}])
    r = post_api(srv, "/v1/messages", body)
    assert r.status_code == 200 and r.json()["content"][0]["type"] == "text"
    assert srv.engine.added[-1]["tool_ttl_hint"] is None  # a cache mark without ttl is no hint


def test_max_tokens_beyond_the_context_is_capped(srv):
    body = post_api(srv, "/v1/messages", _body(max_tokens=32000)).json()
    prompt_len = body["usage"]["input_tokens"]
    assert body["usage"]["output_tokens"] == MAX_MODEL_LEN - prompt_len and body["stop_reason"] == "max_tokens"
    body = post_api(srv, "/v1/messages", _body(max_tokens=MAX_MODEL_LEN - 2)).json()  # fits only once capped
    assert body["usage"]["output_tokens"] == MAX_MODEL_LEN - prompt_len
    r = post_api(srv, "/v1/messages", _body(messages=[{"role": "user", "content": "x" * MAX_MODEL_LEN}]))
    assert "max_model_len" in _anthropic_error(r, 400, "invalid_request_error")


def test_stream_event_sequence_matches_the_body(srv):
    events = _events(srv, _body(max_tokens=6))
    names = [n for n, _ in events]
    assert names == ["message_start", "ping", "content_block_start"] + ["content_block_delta"] * 6 + [
        "content_block_stop", "message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["content"] == [] and start["stop_reason"] is None
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    full = post_api(srv, "/v1/messages", _body(max_tokens=6)).json()
    assert full["content"] == [{"type": "text", "text": text}]
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert delta["usage"] == full["usage"] and start["usage"]["input_tokens"] == full["usage"]["input_tokens"]


def test_failure_is_an_error_event_or_a_500(srv):
    events = _events(srv, _body(messages=[{"role": "user", "content": FakeEngine.FAIL}]))
    assert [n for n, _ in events] == ["error"]
    assert events[0][1]["error"]["type"] == "api_error"
    r = post_api(srv, "/v1/messages", _body(messages=[{"role": "user", "content": FakeEngine.FAIL}]))
    _anthropic_error(r, 500, "api_error")


@pytest.mark.parametrize(("body", "needle"), [
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
    (_body(messages=[{"role": "system", "content": "hi"}]), "role"),
    (_body(messages=[{"role": "user", "content": [{"type": "video", "x": 1}]}]), "video"),
    (_body(messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}]), "not supported"),
    (_body(messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}]), "not supported"),
    (_body(messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]}]),
     "no matching tool_use"),
    (_body(tools=[TOOL], tool_choice={"type": "tool", "name": "nope"}), "not in tools"),
    (_body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), "not supported"),
    (_body(max_tokens=0), "max_tokens"),
    (_body(temperature=1.5), "temperature"),
    (_body(messages=[]), "messages"),
    (_body(metadata={"user_id": 5}), "user_id"),
    (_body(output_config={"format": {"type": "json_schema", "schema": {}}}), "structured outputs"),
])
def test_bad_requests_are_anthropic_400s(srv, body, needle):
    n = len(srv.engine.added)
    message = _anthropic_error(post_api(srv, "/v1/messages", body), 400, "invalid_request_error")
    assert needle in message
    assert len(srv.engine.added) == n  # nothing was submitted


NOT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 3}}}, "required": ["n"]}


def test_a_strict_tool_is_honoured_as_on_the_openai_path(srv):
    """``strict: true`` on a tool whose input_schema has a keyword the grammar library does not enforce is a
    400 naming it (as ``/v1/chat/completions`` answers); without ``strict`` the keyword is ignored and
    named in the header; ``strict`` of another type is a 400. Nothing is submitted for a refusal."""
    from agent_engine.server.structured_request import IGNORED_HEADER

    tool = {"name": "pick", "input_schema": NOT_SCHEMA}
    n = len(srv.engine.added)
    message = _anthropic_error(post_api(srv, "/v1/messages", _body(tools=[{**tool, "strict": True}])), 400,
                               "invalid_request_error")
    assert "tool pick" in message and "not at /properties/n" in message
    for wrong in ("yes", 1, "true", [True]):
        message = _anthropic_error(post_api(srv, "/v1/messages", _body(tools=[{**tool, "strict": wrong}])), 400,
                                   "invalid_request_error")
        assert "strict" in message
    assert len(srv.engine.added) == n
    for body in (_body(tools=[tool]), _body(tools=[{**tool, "strict": False}])):
        r = post_api(srv, "/v1/messages", body)
        assert r.status_code == 200, r.text
        assert "not at /properties/n" in r.headers[IGNORED_HEADER]
    r = post_api(srv, "/v1/messages", _body(tools=[{**TOOL, "strict": True}]))  # enforceable: served
    assert r.status_code == 200 and IGNORED_HEADER not in r.headers
    openai_tool = {"type": "function", "function": {"name": "pick", "strict": True, "parameters": NOT_SCHEMA}}
    r = post_api(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": [openai_tool]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_schema_keyword"


def test_other_errors_in_anthropic_shape_and_openai_paths_unchanged(srv):
    _anthropic_error(post_api(srv, "/v1/messages", _body(model="claude-x")), 404, "not_found_error")
    _anthropic_error(post_api(srv, "/v1/messages/batches", {}), 404, "not_found_error")
    _anthropic_error(post_api(srv, "/v1/messages", b"{not json"), 400, "invalid_request_error")
    r = post_api(srv, "/v1/chat/completions", {"messages": []})
    assert r.status_code == 400 and set(r.json()) == {"error"}


def test_count_tokens_matches_the_prompt_of_a_message(srv):
    body = _body(system="sys", tools=[TOOL], messages=[{"role": "user", "content": "how many?"}])
    r = post_api(srv, "/v1/messages/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"})
    assert r.status_code == 200 and set(r.json()) == {"input_tokens"}
    used = post_api(srv, "/v1/messages", body).json()["usage"]
    assert r.json()["input_tokens"] == used["input_tokens"] + used["cache_read_input_tokens"]
    r = post_api(srv, "/v1/messages/count_tokens", {"model": MODEL, "messages": [{"role": "bot", "content": "x"}]})
    _anthropic_error(r, 400, "invalid_request_error")


def test_job_hints_and_cache_ttl_reach_the_engine(srv):
    user_id = "user_1f2e_account__session_0b7c9a12-3d4e-5f60-7182-93a4b5c6d7e8"
    post_api(srv, "/v1/messages", _body(metadata={"user_id": user_id}, messages=[{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]))
    added = srv.engine.added[-1]
    assert added["job_id"] == "0b7c9a12-3d4e-5f60-7182-93a4b5c6d7e8" and added["hint_source"] == "metadata.user_id"
    assert added["tool_ttl_hint"] == 3600.0
    post_api(srv, "/v1/messages", _body(tool_ttl_hint=7), headers={"X-Claude-Code-Session-Id": "cc-42"})
    added = srv.engine.added[-1]
    assert added["job_id"] == "cc-42" and added["hint_source"] == "claude-code" and added["tool_ttl_hint"] == 7.0


def test_api_key_by_x_api_key_or_bearer(srv):
    srv.state.api_key = "sekret"
    try:
        _anthropic_error(post_api(srv, "/v1/messages", _body()), 401, "authentication_error")
        _anthropic_error(post_api(srv, "/v1/messages", _body(), headers={"x-api-key": "wrong"}), 401,
                         "authentication_error")
        assert post_api(srv, "/v1/messages", _body(), headers={"x-api-key": "sekret"}).status_code == 200
        assert post_api(srv, "/v1/messages", _body(), headers={"Authorization": "Bearer sekret"}).status_code == 200
        r = httpx.get(srv.base_url + "/v1/models", timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    finally:
        srv.state.api_key = None
