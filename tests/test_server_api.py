"""End-to-end API tests: the real server (embedded model) over HTTP with the openai SDK and httpx.

Greedy output over HTTP must equal an in-process ``LLMEngine`` with the same model and config.
Slow: the shared server loads the real model (fast app tests on a fake engine: ``test_server_app``).
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from server_fixtures import engine_generate, reference_engine, shared_server

from agent_engine.server.launcher import parse_prometheus
from scheduler import SamplingParams

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PROMPT = "def add(a, b):\n    return"


@pytest.fixture(scope="module")
def srv():
    return shared_server()


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def ref():
    return reference_engine()


def _sse_events(resp: httpx.Response) -> list[object]:
    events = []
    for line in resp.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_models_and_health(srv, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [srv.engine.model_name]
    r = httpx.get(srv.base_url + "/health", timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_completion_greedy_matches_engine(srv, client, ref):
    resp = client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=12, temperature=0,
                                     extra_body={"job_id": "job-greedy", "return_token_ids": True})
    want = engine_generate(ref, PROMPT, SamplingParams(temperature=0, max_tokens=12), "greedy-1")
    choice = resp.choices[0]
    assert choice.text == want.outputs[0].text
    assert choice.finish_reason == want.outputs[0].finish_reason
    extra = resp.model_extra or {}
    assert extra["job_id"] == "job-greedy"
    assert extra["prompt_token_ids"] == want.prompt_token_ids
    assert (choice.model_extra or {})["token_ids"] == want.outputs[0].token_ids
    assert resp.usage.prompt_tokens == len(want.prompt_token_ids)
    assert resp.usage.completion_tokens == len(want.outputs[0].token_ids)


def test_completion_stream_equals_non_stream(srv, client):
    kw = {"model": srv.engine.model_name, "prompt": PROMPT + " a", "max_tokens": 10, "temperature": 0}
    full = client.completions.create(**kw)
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True},
                                            extra_body={"job_id": "job-s"}, **kw))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [full.choices[0].finish_reason]


def test_chat_greedy_matches_engine_and_streams(srv, client, ref):
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List files."}]
    resp = client.chat.completions.create(model=srv.engine.model_name, messages=messages, max_tokens=10,
                                          temperature=0,
                                          extra_body={"session_id": "sess-1", "is_last_step": True})
    prompt = ref.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    want = engine_generate(ref, prompt, SamplingParams(temperature=0, max_tokens=10), "chat-1")
    assert resp.choices[0].message.content == want.outputs[0].text
    assert resp.choices[0].message.role == "assistant"
    assert (resp.model_extra or {})["job_id"] == "sess-1"
    stream = client.chat.completions.create(model=srv.engine.model_name, messages=messages, max_tokens=10,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want.outputs[0].text
    assert chunks[-1].usage.total_tokens == resp.usage.total_tokens


def test_multiple_prompts_and_token_id_prompt(srv, client, ref):
    ids = ref.tokenizer("hello there")["input_ids"]
    resp = client.completions.create(model=srv.engine.model_name, prompt=["first prompt", "second one"],
                                     max_tokens=4, temperature=0)
    assert [c.index for c in resp.choices] == [0, 1]
    for i, p in enumerate(["first prompt", "second one"]):
        want = engine_generate(ref, p, SamplingParams(temperature=0, max_tokens=4), f"multi-{i}")
        assert resp.choices[i].text == want.outputs[0].text
    by_ids = client.completions.create(model=srv.engine.model_name, prompt=ids, max_tokens=4, temperature=0)
    by_text = client.completions.create(model=srv.engine.model_name, prompt="hello there", max_tokens=4,
                                        temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    # Several prompts, streamed: every index ends with a finish reason.
    r = httpx.post(srv.base_url + "/v1/completions", timeout=60, json={
        "prompt": ["a b", "c d", "e f"], "max_tokens": 3, "temperature": 0, "stream": True})
    events = _sse_events(r)
    assert events[-1] == "[DONE]"
    done = {e["choices"][0]["index"] for e in events[:-1] if e["choices"][0]["finish_reason"]}
    assert done == {0, 1, 2}


def test_logprobs(srv, client):
    resp = client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=5, temperature=0,
                                     logprobs=2)
    lp = resp.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == 5
    assert all(v <= 0 for v in lp.token_logprobs) and all(len(t) <= 2 for t in lp.top_logprobs)
    assert "".join(lp.tokens) == resp.choices[0].text
    chat = client.chat.completions.create(model=srv.engine.model_name,
                                          messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                          temperature=0, logprobs=True, top_logprobs=3)
    content = chat.choices[0].logprobs.content
    assert len(content) == 4 and all(len(c.top_logprobs) == 3 for c in content)


def test_stop_min_tokens_ignore_eos_seed(srv, client):
    base = client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=12, temperature=0)
    text = base.choices[0].text
    assert len(text) > 3
    stop = text[2:4]
    cut = client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=12, temperature=0,
                                    stop=[stop])
    assert cut.choices[0].finish_reason == "stop" and stop not in cut.choices[0].text
    long = client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=20, temperature=0,
                                     extra_body={"ignore_eos": True, "min_tokens": 20})
    assert long.usage.completion_tokens == 20 and long.choices[0].finish_reason == "length"
    a, b = (client.completions.create(model=srv.engine.model_name, prompt=PROMPT, max_tokens=8,
                                      temperature=1.0, top_p=0.9, seed=7, extra_body={"top_k": 50})
            for _ in range(2))
    assert a.choices[0].text == b.choices[0].text


def test_prefix_cache_reported_and_salt_isolates(srv, client):
    prompt = "shared agent context " * 12  # > several blocks
    kw = {"model": srv.engine.model_name, "prompt": prompt, "max_tokens": 2, "temperature": 0}
    client.completions.create(**kw)
    again = client.completions.create(**kw)
    assert again.usage.prompt_tokens_details.cached_tokens >= 16
    salted = client.completions.create(extra_body={"cache_salt": "tenant-b"}, **kw)
    assert salted.usage.prompt_tokens_details.cached_tokens == 0
    salted_again = client.completions.create(extra_body={"cache_salt": "tenant-b"}, **kw)
    assert salted_again.usage.prompt_tokens_details.cached_tokens >= 16


def test_job_hints_headers_and_release(srv):
    url = srv.base_url
    body = {"prompt": "x", "max_tokens": 2, "temperature": 0, "tool_name": "bash", "tool_ttl_hint": 1.5}
    r = httpx.post(url + "/v1/completions", json=body, headers={"X-Job-Id": "job-h"}, timeout=60)
    assert r.status_code == 200 and r.json()["job_id"] == "job-h"
    r = httpx.post(url + "/v1/completions", json=body, headers={"X-Session-ID": "sess-h"}, timeout=60)
    assert r.json()["job_id"] == "sess-h"
    r = httpx.post(url + "/v1/completions", json={**body, "job_id": "body-wins"}, headers={"X-Job-Id": "hdr"},
                   timeout=60)
    assert r.json()["job_id"] == "body-wins"
    r = httpx.delete(url + "/v1/jobs/job-h", timeout=30)
    assert r.status_code == 200 and r.json()["id"] == "job-h"
    assert httpx.delete(url + "/v1/jobs/job-h", timeout=30).status_code == 404  # over: unknown now
    metrics = httpx.get(url + "/metrics", timeout=30).text
    assert "agent_engine_jobs_released_total" in metrics


def test_metrics_exposition(srv, client):
    client.completions.create(model=srv.engine.model_name, prompt="metrics", max_tokens=3, temperature=0)
    before = httpx.get(srv.base_url + "/metrics", timeout=30).text
    jct_count = _metric_value(before, "agent_engine_job_completion_seconds_count")
    for step, last in ((0, False), (1, True)):
        client.completions.create(model=srv.engine.model_name, prompt=f"job turn {step}", max_tokens=2,
                                  temperature=0,
                                  extra_body={"job_id": "job-metrics", "is_last_step": last})
    text = httpx.get(srv.base_url + "/metrics", timeout=30).text
    assert _metric_value(text, "agent_engine_job_completion_seconds_count") == jct_count + 1
    for name in ("agent_engine_requests_running", "agent_engine_requests_waiting",
                 "agent_engine_kv_blocks_in_use", "agent_engine_kv_blocks_cached_free",
                 "agent_engine_kv_blocks_empty", "agent_engine_kv_blocks_pinned",
                 "agent_engine_prefix_cache_hit_tokens_total",
                 "agent_engine_prefix_cache_queried_tokens_total",
                 "agent_engine_preemptions_total", "agent_engine_time_to_first_token_seconds_bucket",
                 "agent_engine_inter_token_latency_seconds_bucket",
                 "agent_engine_e2e_request_latency_seconds_count", "agent_engine_pins_created_total",
                 "agent_engine_pins_hit_total", "agent_engine_pins_expired_total",
                 "agent_engine_pins_early_released_total", "agent_engine_pinned_block_seconds_total",
                 "agent_engine_kv_blocks_soft_pinned", "agent_engine_pins_soft_yielded_total",
                 "agent_engine_pins_late_hit_total", "agent_engine_soft_pinned_block_seconds_total",
                 'agent_engine_job_turns_by_hint_total{hint_source="job_id",tenant="default"}'):
        assert name in text, name


def _metric_value(text: str, name: str) -> float:
    return parse_prometheus(text).get(name, 0.0)
