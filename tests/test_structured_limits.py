"""Output constraints that could stall or fool the server, over HTTP on the real engine (embedded model):
a grammar that compiles too long or is too large is a 400 while another tenant's chat goes on; a
client that leaves cancels its compile; a constraint that admits no output is a 400, not a 500; a
``strict`` schema with a keyword the library does not enforce is a 400, a non-strict one is answered
with a header naming what was ignored."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixtures import ThreadServer, assert_error, build_engine, start_thread_server

from agent_engine.engine.engine_stats import GrammarStats
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.server_config import ServerConfig
from agent_engine.server.structured_request import IGNORED_HEADER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ATTACKER, VICTIM, ADMIN = "attacker-key", "victim-key", "admin-key"
BUDGET_S = 3.0
NOTHING = r"[^\s\S]"
USER = [{"role": "user", "content": "hi"}]


def _optional_ints(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


# 1,000 optional properties: under the size cap, about 10 s to compile on a quiet 2-core machine
# (past the 3 s budget however busy the machine is); 5,000: past the size cap.
SLOW_SCHEMA = _optional_ints(1000)
HUGE_SCHEMA = _optional_ints(5000)


@pytest.fixture(scope="module")
def srv() -> Iterator[ThreadServer]:
    config = ServerConfig(api_keys=(ATTACKER, VICTIM), admin_keys=(ADMIN,), drain_timeout=2.0, log_level="warning",
                          grammar_limits=GrammarLimits(timeout_s=BUDGET_S))
    server = start_thread_server(AsyncEngine(build_engine(), grammar_limits=config.grammar_limits), config)
    yield server
    server.stop()
    server.engine.close()


def _post(srv: ThreadServer, path: str, body: dict[str, Any], key: str = ATTACKER, timeout: float = 120) -> httpx.Response:
    return httpx.post(srv.base_url + path, json=body, timeout=timeout, headers={"Authorization": f"Bearer {key}"})


def _chat(srv: ThreadServer, key: str = VICTIM, **kw: Any) -> httpx.Response:
    return _post(srv, "/v1/chat/completions", {"messages": USER, "max_tokens": 2, **kw}, key)


def _schema_format(schema: dict[str, Any], strict: bool | None = None) -> dict[str, Any]:
    fmt: dict[str, Any] = {"name": "out", "schema": schema}
    if strict is not None:
        fmt["strict"] = strict
    return {"type": "json_schema", "json_schema": fmt}


def _compile_stats(srv: ThreadServer) -> GrammarStats:
    return srv.stats().grammar


# ---- a grammar that costs too much -------------------------------------------------------------------
def test_a_slow_grammar_is_refused_at_its_budget_while_another_tenant_chats(srv: ThreadServer) -> None:
    quiet = [_timed_chat(srv) for _ in range(5)]
    attack: dict[str, Any] = {}

    def attacker() -> None:
        t0 = time.monotonic()
        attack["response"] = _chat(srv, ATTACKER, response_format=_schema_format(SLOW_SCHEMA))
        attack["span"] = (t0, time.monotonic())

    thread = threading.Thread(target=attacker)
    thread.start()
    time.sleep(0.5)  # its compile is running now
    during = []
    while thread.is_alive() and len(during) < 5:
        during.append(_timed_chat(srv))
        assert httpx.get(srv.base_url + "/health", timeout=10).status_code == 200
    thread.join(120)
    err = assert_error(attack["response"], 400, "grammar_compile_timeout")
    assert f"within {BUDGET_S:g} s" in err["message"] and "--grammar-compile-timeout" in err["message"]
    start, end = attack["span"]
    assert during, "the attacker's compile ended before any victim chat was sent"
    # The victim's chats ran while the attacker's grammar compiled (the step loop never compiles), at
    # a latency near their quiet one (generous: the machine may be busy).
    assert statistics.median(during) <= 5 * statistics.median(quiet) + 1.0, (quiet, during)
    assert statistics.median(during) < (end - start) / 2, (during, end - start)
    assert srv.stats().num_failed_steps == 0


def _timed_chat(srv: ThreadServer) -> float:
    t0 = time.monotonic()
    r = _chat(srv)
    assert r.status_code == 200, r.text
    return time.monotonic() - t0


def test_a_grammar_past_the_size_cap_is_refused_at_once(srv: ThreadServer) -> None:
    err = assert_error(_chat(srv, ATTACKER, response_format=_schema_format(HUGE_SCHEMA)), 400, "grammar_too_large")
    assert "--max-grammar-size" in err["message"]


def test_a_client_that_leaves_cancels_its_compile(srv: ThreadServer) -> None:
    before = _compile_stats(srv).grammar_compiles_cancelled
    slow = _optional_ints(999)  # not cached: its own compile
    with pytest.raises(httpx.ReadTimeout):
        _post(srv, "/v1/chat/completions", {"messages": USER, "max_tokens": 2,
                                            "response_format": _schema_format(slow)}, timeout=1.0)
    deadline = time.monotonic() + 60
    while _compile_stats(srv).grammar_compiles_cancelled == before:
        assert time.monotonic() < deadline, "the compile of a request whose client left was not cancelled"
        time.sleep(0.1)
    assert _compile_stats(srv).grammar_compiles_cancelled == before + 1
    assert srv.wait_idle().scheduler.num_running == 0  # nothing of it reached the engine
    metrics = httpx.get(srv.base_url + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).text
    assert f"agent_engine_grammar_compiles_cancelled_total {before + 1}" in metrics


# ---- constraints that admit no output ----------------------------------------------------------------
CYCLE = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
DEAD_TOOL = [{"type": "function", "function": {"name": "run", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string", "pattern": NOTHING}}, "required": ["cmd"]}}}]
EMPTY_LANGUAGE = [
    ("/v1/chat/completions", {"messages": USER, "response_format": _schema_format(CYCLE)}),
    ("/v1/chat/completions", {"messages": USER, "structured_outputs": {"regex": NOTHING}}),
    ("/v1/completions", {"prompt": "x", "structured_outputs": {"regex": NOTHING}}),
    ("/v1/completions", {"prompt": "x", "structured_outputs": {"grammar": "root ::= root"}}),
    ("/v1/chat/completions", {"messages": USER, "tools": DEAD_TOOL, "tool_choice": "required"}),
]


@pytest.mark.parametrize(("path", "body"), EMPTY_LANGUAGE,
                         ids=["ref-cycle", "regex-chat", "regex-completions", "grammar", "tool-required"])
def test_a_constraint_that_admits_no_output_is_a_400(srv: ThreadServer, path: str, body: dict[str, Any]) -> None:
    err = assert_error(_post(srv, path, {"max_tokens": 8, **body}), 400, "grammar_admits_no_output")
    assert "admits no output" in err["message"]
    assert srv.stats().num_failed_steps == 0


# ---- keywords the library does not enforce -------------------------------------------------------------
OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
STRICT_REFUSED = [
    ("not", {"type": "integer", "not": {"const": 1}}),
    ("if", {**OBJ, "if": {"required": ["a"]}, "then": {"required": ["b"]}}),
    ("patternProperties", {**OBJ, "patternProperties": {"^x": {"type": "integer"}}}),
    ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    ("format", {"type": "string", "format": "credit-card"}),
    ("dependentSchemas", {**OBJ, "dependentSchemas": {"a": {"required": ["b"]}}}),
    ("multipleOf", {"type": "number", "multipleOf": 0.25}),
    ("allOf", {"allOf": [{"type": "string"}, {"type": "integer"}]}),
    ("$ref", {"$ref": "https://example.com/schema.json"}),
]


@pytest.mark.parametrize(("keyword", "schema"), STRICT_REFUSED, ids=[k for k, _ in STRICT_REFUSED])
def test_a_strict_schema_with_an_unenforced_keyword_is_a_400(srv: ThreadServer, keyword: str,
                                                            schema: dict[str, Any]) -> None:
    r = _chat(srv, ATTACKER, response_format=_schema_format(schema, strict=True))
    err = assert_error(r, 400, "unsupported_schema_keyword")
    assert f"uses {keyword} at" in err["message"] and err["param"] == "response_format"


def test_a_strict_tool_with_an_unenforced_keyword_is_a_400(srv: ThreadServer) -> None:
    tool = {"type": "function", "function": {"name": "pick", "strict": True, "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "not": {"const": 3}}}, "required": ["n"]}}}
    err = assert_error(_chat(srv, ATTACKER, tools=[tool], tool_choice="required"), 400, "unsupported_schema_keyword")
    assert "tool pick" in err["message"] and "not at /properties/n" in err["message"]


def test_without_strict_what_was_ignored_is_named_in_a_header(srv: ThreadServer) -> None:
    schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3,
              "uniqueItems": True}
    for body in ({"response_format": _schema_format(schema)}, {"structured_outputs": {"json": schema}}):
        r = _chat(srv, ATTACKER, max_tokens=24, **body)
        assert r.status_code == 200, r.text
        assert "uniqueItems at /" in r.headers[IGNORED_HEADER]
    plain = _chat(srv, ATTACKER, response_format=_schema_format({"type": "integer", "minimum": 1}, strict=True))
    assert plain.status_code == 200 and IGNORED_HEADER not in plain.headers
