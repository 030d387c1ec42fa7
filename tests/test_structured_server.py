"""Structured outputs over HTTP on the real engine (embedded model, random weights).

The weights are random, so only the constraint makes an output valid: every forced tool call must
parse and validate against its tool's schema, every ``json_schema`` answer against its schema, for
many seeded requests (a small-scale run of ``benchmarks.structured_bench``). Strings are bounded by
``pattern`` so a random model ends them in a few tokens.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import jsonschema
import openai
import pytest
from server_fixtures import assert_error, post_api, shared_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CMD = {"type": "object", "properties": {"command": {"type": "string", "pattern": "^[a-z ./-]{1,10}$"}},
       "required": ["command"], "additionalProperties": False}
VIEW = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z]{1,6}[.]py$"},
                                         "line": {"type": "integer", "minimum": 1, "maximum": 99}},
        "required": ["path", "line"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": CMD}},
         {"type": "function", "function": {"name": "view", "parameters": VIEW, "strict": True}}]
SCHEMAS = {"bash": CMD, "view": VIEW}
RECORD = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Za-z]{1,8}$"},
                                           "ok": {"type": "boolean"}, "mode": {"enum": ["fast", "slow"]}},
          "required": ["name", "ok", "mode"], "additionalProperties": False}
USER = [{"role": "user", "content": "Look at the repository."}]
CHOICES: list[Any] = ["required", {"type": "function", "function": {"name": "view"}},
                      {"type": "function", "function": {"name": "bash"}}]


@pytest.fixture(scope="module")
def srv():
    return shared_server()


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _check_call(name: str, arguments: str) -> None:
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])


def test_forced_and_strict_calls_always_parse_and_validate(srv, client) -> None:
    for seed in range(24):
        choice = CHOICES[seed % len(CHOICES)]
        r = client.chat.completions.create(model=srv.engine.model_name, messages=USER, tools=TOOLS,
                                           tool_choice=choice, seed=seed, temperature=1.0, max_tokens=200)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        [call] = c.message.tool_calls
        if isinstance(choice, dict):
            assert call.function.name == choice["function"]["name"]
        _check_call(call.function.name, call.function.arguments)


def test_json_schema_and_vllm_formats(srv, client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "record", "schema": RECORD, "strict": True}}
    for seed in range(8):
        r = client.chat.completions.create(model=srv.engine.model_name, messages=USER, response_format=fmt,
                                           seed=seed, temperature=1.0, max_tokens=200)
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].message.content), RECORD)
    obj = client.chat.completions.create(model=srv.engine.model_name, messages=USER, max_tokens=300, seed=1,
                                         extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    assert obj.choices[0].message.content in ("yes", "no")
    done = client.completions.create(model=srv.engine.model_name, prompt="id:", max_tokens=40, seed=2,
                                     extra_body={"guided_regex": "[0-9]{3}-[a-z]{2}"})
    assert done.choices[0].finish_reason == "stop" and len(done.choices[0].text) == 6


def test_streamed_forced_call_assembles_to_a_valid_call(srv) -> None:
    body = {"model": srv.engine.model_name, "messages": USER, "tools": TOOLS, "tool_choice": "required",
            "stream": True, "seed": 5, "max_tokens": 200}
    names, args, finish = [], [], None
    with httpx.stream("POST", srv.base_url + "/v1/chat/completions", json=body, timeout=120) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"][0]
            for tc in choice["delta"].get("tool_calls") or ():
                names += [tc["function"]["name"]] if tc["function"].get("name") else []
                args.append(tc["function"].get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    assert finish == "tool_calls" and len(names) == 1
    _check_call(names[0], "".join(args))


def test_max_tokens_inside_a_call_is_length_not_a_call(srv, client) -> None:
    r = client.chat.completions.create(model=srv.engine.model_name, messages=USER, tools=TOOLS, seed=0,
                                       tool_choice={"type": "function", "function": {"name": "view"}}, max_tokens=3)
    c = r.choices[0]
    assert c.finish_reason == "length" and not c.message.tool_calls
    a = anthropic.Anthropic(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=120)
    m = a.messages.create(model=srv.engine.model_name, max_tokens=3, messages=USER,
                          tools=[{"name": "view", "input_schema": VIEW}], tool_choice={"type": "tool", "name": "view"})
    assert m.stop_reason == "max_tokens" and all(b.type != "tool_use" for b in m.content)


def test_anthropic_any_and_tool_choice_give_valid_tool_use(srv) -> None:
    a = anthropic.Anthropic(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=120)
    tools = [{"name": "bash", "input_schema": CMD}, {"name": "view", "input_schema": VIEW}]
    for seed, choice in enumerate(({"type": "any"}, {"type": "tool", "name": "bash"}) * 3):
        m = a.messages.create(model=srv.engine.model_name, max_tokens=200, messages=USER, tools=tools,
                              tool_choice=choice, extra_body={"seed": seed})
        [use] = [b for b in m.content if b.type == "tool_use"]
        assert m.stop_reason == "tool_use"
        jsonschema.validate(use.input, SCHEMAS[use.name])


def test_a_schema_the_library_rejects_is_a_400_and_harms_nothing(srv) -> None:
    before = srv.stats().scheduler.blocks_in_use
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/definitions/missing"}}}
    r = post_api(srv, "/v1/chat/completions", {"messages": USER, "response_format": bad, "max_tokens": 5})
    assert "structured output" in assert_error(r, 400)["message"]
    r = post_api(srv, "/v1/completions", {"prompt": "x", "structured_outputs": {"regex": "("}, "max_tokens": 5})
    assert_error(r, 400)
    ok = post_api(srv, "/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert ok.status_code == 200
    assert srv.wait_idle().scheduler.blocks_in_use == before
