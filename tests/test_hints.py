"""Session conventions -> job: every convention, its precedence, its source label, and bad hints."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agent_engine.server.hints import (
    HINT_SOURCES,
    MAX_JOB_ID_CHARS,
    request_hints,
    resolve_job,
    session_of_user_id,
)
from scheduler import JobHints
from scheduler.job_hints import tenant_job_id

pytestmark = pytest.mark.core

UUID = "0b7c3f6e-8a1d-4c2e-9f10-5d6e7a8b9c0d"


@pytest.mark.parametrize(("body", "headers", "expected"), [
    ({"job_id": "j1"}, {}, ("j1", "job_id")),
    ({"session_id": "s1"}, {}, ("s1", "session_id")),
    ({}, {"x-job-id": "h1"}, ("h1", "x-job-id")),
    ({}, {"x-session-id": "h2"}, ("h2", "x-session-id")),
    ({"prompt_cache_key": "pck"}, {}, ("pck", "prompt_cache_key")),
    ({"metadata": {"session_id": "oh-1"}}, {}, ("oh-1", "metadata.session_id")),
    ({"litellm_session_id": "ll-1"}, {}, ("ll-1", "litellm_session_id")),
    ({"metadata": {"litellm_session_id": "ll-2"}}, {}, ("ll-2", "litellm_session_id")),
    ({}, {"x-claude-code-session-id": UUID}, (UUID, "claude-code")),
    ({}, {"session-id": "codex-1"}, ("codex-1", "session-id")),
    ({}, {"session_id": "codex-2"}, ("codex-2", "session-id")),
    ({"metadata": {"user_id": f"user_abc_account_x_session_{UUID}"}}, {}, (UUID, "metadata.user_id")),
    ({"metadata": {"user_id": json.dumps({"session_id": "js-1", "device": "d"})}}, {}, ("js-1", "metadata.user_id")),
    ({"metadata": {"user_id": "plain-user"}}, {}, ("plain-user", "metadata.user_id")),
    ({}, {}, (None, "none")),
])
def test_each_convention_maps_to_its_job_and_source(body, headers, expected):
    assert resolve_job(body, headers) == expected
    assert expected[1] in HINT_SOURCES


def test_precedence_is_the_documented_order():
    body = {"job_id": "a", "session_id": "b", "prompt_cache_key": "c", "metadata": {"session_id": "d"}}
    headers = {"x-job-id": "e", "x-claude-code-session-id": "f"}
    assert resolve_job(body, headers) == ("a", "job_id")
    del body["job_id"]
    assert resolve_job(body, headers) == ("b", "session_id")
    del body["session_id"]
    assert resolve_job(body, headers) == ("e", "x-job-id")
    del headers["x-job-id"]
    assert resolve_job(body, headers) == ("c", "prompt_cache_key")
    del body["prompt_cache_key"]
    assert resolve_job(body, headers) == ("d", "metadata.session_id")
    del body["metadata"]
    assert resolve_job(body, headers) == ("f", "claude-code")


def test_empty_strings_count_as_absent():
    assert resolve_job({"job_id": "", "prompt_cache_key": "k"}, {"x-job-id": ""}) == ("k", "prompt_cache_key")


@pytest.mark.parametrize(("body", "match"), [
    ({"job_id": 5}, "job_id must be a string"),
    ({"prompt_cache_key": ["x"]}, "prompt_cache_key must be a string"),
    ({"metadata": "not-an-object"}, "metadata must be an object"),
    ({"job_id": "x" * (MAX_JOB_ID_CHARS + 1)}, "job_id must be 1-256 characters"),
    ({"job_id": "bad id with spaces"}, "job_id must be"),
    ({"is_last_step": "yes"}, "is_last_step must be of type bool"),
    ({"priority": True}, "priority must be of type int"),
    ({"tool_ttl_hint": -1}, "tool_ttl_hint"),
    ({"tool_ttl_hint": float("nan")}, "tool_ttl_hint"),
])
def test_a_hint_of_the_wrong_type_or_shape_is_a_value_error(body, match):
    with pytest.raises(ValueError, match=match):
        request_hints(body, {})


def test_foreign_ids_are_hashed_not_refused_and_stay_stable():
    long_key = "k" * 5000
    job, source = resolve_job({"prompt_cache_key": long_key}, {})
    assert source == "prompt_cache_key" and job.startswith("h-") and len(job) == 34
    assert resolve_job({"prompt_cache_key": long_key}, {})[0] == job
    assert resolve_job({"prompt_cache_key": "with space"}, {})[0].startswith("h-")


def test_request_hints_carries_every_field():
    hints = request_hints({"session_id": "s", "is_last_step": True, "priority": 2, "cache_salt": "salt",
                           "tool_name": "bash:ls", "tool_ttl_hint": 3}, {})
    assert hints == JobHints(job_id="s", hint_source="session_id", tenant=None, is_last_step=True,
                             priority=2, cache_salt="salt", tool_name="bash:ls", tool_ttl_hint=3.0)
    assert request_hints({}, {}, tenant="t-1").tenant == "t-1"


def test_scoped_hints_put_a_tenant_in_its_namespace():
    hints = JobHints.for_job("j", tenant="t-1", cache_salt="s")
    assert hints.scoped() == replace(hints, job_id="t-1/j", cache_salt="t-1\x1fs")
    assert hints.scoped(share_prefix_cache=True) == replace(hints, job_id="t-1/j")
    assert JobHints.for_job("j").scoped() == JobHints.for_job("j")  # the default tenant: unchanged
    assert JobHints(tenant="t").scoped().job_id is None


def test_one_function_scopes_a_job_id_for_a_request_and_for_its_release():
    # The server's DELETE /v1/jobs names the job through ``tenant_job_id``, as ``scoped`` keys a request.
    assert tenant_job_id(None, "j") == "j" and tenant_job_id("t-1", "j") == "t-1/j"
    for tenant in (None, "t-1"):
        assert JobHints.for_job("j", tenant=tenant).scoped().job_id == tenant_job_id(tenant, "j")


@pytest.mark.parametrize("bad", [{"tool_ttl_hint": -1.0}, {"tool_ttl_hint": float("nan")}, {"priority": True},
                                 {"job_id": ""}])
def test_job_hints_refuse_bad_values(bad):
    with pytest.raises(ValueError):
        JobHints(**bad)


def test_user_id_forms():
    assert session_of_user_id(f"user_1_session_{UUID}") == UUID
    assert session_of_user_id('{"session_id": "x"}') == "x"
    assert session_of_user_id('{"user": "x"}') is None
    assert session_of_user_id("plain") == "plain"
