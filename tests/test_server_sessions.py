"""End to end: every session convention reaches the scheduler as a job (pins made and hit, counted by
``hint_source``), a hint-less agent is inferred from the prefix chain, and bad hints are 400s."""

from __future__ import annotations

import httpx
import pytest
from server_fixtures import assert_error, build_engine, post_api, start_thread_server

from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.launcher import parse_prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CONVENTIONS = [  # (hint_source, body extras, headers)
    ("job_id", {"job_id": "j-body"}, {}),
    ("session_id", {"session_id": "s-body"}, {}),
    ("x-job-id", {}, {"X-Job-Id": "j-header"}),
    ("x-session-id", {}, {"X-Session-ID": "s-header"}),
    ("prompt_cache_key", {"prompt_cache_key": "codex-conv-1"}, {}),
    ("metadata.session_id", {"metadata": {"session_id": "oh-1"}}, {}),
    ("litellm_session_id", {"litellm_session_id": "ll-1"}, {}),
    ("claude-code", {}, {"X-Claude-Code-Session-Id": "cc-1"}),
    ("session-id", {}, {"session-id": "codex-1"}),
    ("metadata.user_id", {"metadata": {"user_id": "user_x_account_y_session_abcdef12-3456"}}, {}),
]


@pytest.fixture(scope="module")
def srv():
    server = start_thread_server(AsyncEngine(build_engine(policy="continuum", ttl_policy="fixed",
                                                          pin_threshold=60.0)))
    yield server
    server.stop()


def _turn(srv, prompt: list[int], extra: dict, headers: dict) -> list[int]:
    body = {"prompt": prompt, "max_tokens": 3, "temperature": 0, "ignore_eos": True, "return_token_ids": True,
            "tool_name": "bash:ls", **extra}
    r = post_api(srv, "/v1/completions", body, headers=headers)
    assert r.status_code == 200, r.text
    return prompt + r.json()["choices"][0]["token_ids"]


def _metrics(srv) -> str:
    return httpx.get(srv.base_url + "/metrics", timeout=30).text


def _sample(text: str, name: str, source: str) -> float:
    return parse_prometheus("\n".join(
        line for line in text.splitlines() if f'hint_source="{source}"' in line)).get(name, 0.0)


@pytest.mark.parametrize(("source", "extra", "headers"), CONVENTIONS, ids=[c[0] for c in CONVENTIONS])
def test_each_convention_pins_and_hits_under_its_source(srv, source, extra, headers):
    seed = 1000 + 40 * CONVENTIONS.index((source, extra, headers))
    history = _turn(srv, list(range(seed, seed + 37)), extra, headers)
    _turn(srv, history + [5, 6, 7], {**extra, "is_last_step": True}, headers)
    text = _metrics(srv)
    assert _sample(text, "agent_engine_job_turns_by_hint_total", source) == 2
    assert _sample(text, "agent_engine_pins_made_by_hint_total", source) == 1
    assert _sample(text, "agent_engine_pin_hits_by_hint_total", source) == 1


def test_a_hint_less_agent_is_inferred_as_one_job_and_hits_its_pins(srv):
    before = parse_prometheus(_metrics(srv))
    history = list(range(3000, 3045))
    for _ in range(3):
        history = _turn(srv, history, {}, {}) + [11, 12, 13, 14]
    text = _metrics(srv)
    after = parse_prometheus(text)
    assert after["agent_engine_job_inference_joins_total"] - before.get(
        "agent_engine_job_inference_joins_total", 0) == 2
    assert _sample(text, "agent_engine_pin_hits_by_hint_total", "inferred") >= 2
    # Another agent with the same system prompt but its own task never joins that job.
    other = list(range(3000, 3030)) + [9] * 20
    _turn(srv, other, {}, {})
    final = parse_prometheus(_metrics(srv))
    assert final["agent_engine_job_inference_joins_total"] == after["agent_engine_job_inference_joins_total"]


@pytest.mark.parametrize(("body", "headers"), [
    ({"job_id": 7}, {}),
    ({"job_id": "x" * 300}, {}),
    ({"metadata": "nope"}, {}),
    ({"prompt_cache_key": {"a": 1}}, {}),
    ({"is_last_step": "yes"}, {}),
    ({}, {"X-Job-Id": "has spaces"}),
])
def test_bad_hints_are_400s(srv, body, headers):
    r = post_api(srv, "/v1/completions", {"prompt": "hi", "max_tokens": 1, **body}, headers=headers)
    assert_error(r, 400)
