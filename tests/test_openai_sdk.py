"""The official ``openai`` SDK against a real server with ``tools``: plain and streamed tool calls.

The embedded default model is random, so a named ``tool_choice`` is what makes it call: the call is
sampled under the tool's grammar, so even a random model writes one whole call whose arguments match
the schema (the city is an enum, so the call ends within the token budget). On SmolLM2-135M-Instruct
(converted from its GGUF by ``model_fixtures``) the same holds.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from server_fixtures import ThreadServer, shared_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CITIES = ["Paris", "Oslo", "Lima"]
TOOLS: list[Any] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": CITIES}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]
MESSAGES: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED: Any = {"type": "function", "function": {"name": "get_weather"}}


def client(srv: ThreadServer) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=srv.base_url + "/v1", api_key="unused", timeout=120, max_retries=0)


def ask(srv: ThreadServer, max_tokens: int, **kw: Any) -> tuple[Any, tuple[str | None, list[Any], str | None]]:
    """The plain response and the streamed one added up: (content, [(id, name, arguments)], finish)."""
    sdk = client(srv)
    args = {"model": srv.state.model_name, "messages": MESSAGES, "tools": TOOLS, "max_tokens": max_tokens,
            "temperature": 0, **kw}
    plain = sdk.chat.completions.create(**args)
    content, calls, finish = None, {}, None
    for chunk in sdk.chat.completions.create(**args, stream=True):
        choice = chunk.choices[0]
        if choice.delta.content:
            content = (content or "") + choice.delta.content
        for d in choice.delta.tool_calls or []:
            entry = calls.setdefault(d.index, [None, None, ""])
            if d.id:
                entry[0], entry[1] = d.id, d.function.name
            entry[2] += d.function.arguments or ""
        finish = choice.finish_reason or finish
    return plain, (content, [tuple(calls[i]) for i in sorted(calls)], finish)


def check_forced_call(plain: Any, streamed: tuple[str | None, list[Any], str | None]) -> str:
    """Both responses made exactly one get_weather call, alike; returns its arguments."""
    choice = plain.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    content, s_calls, finish = streamed
    assert finish == "tool_calls" and content == choice.message.content
    assert [(n, a) for _, n, a in s_calls] == [("get_weather", call.function.arguments)]
    return call.function.arguments


def test_named_tool_choice_with_the_sdk_on_the_default_model() -> None:
    srv = shared_server()
    plain, streamed = ask(srv, 48, tool_choice=NAMED)
    arguments = check_forced_call(plain, streamed)
    value = json.loads(arguments)  # the grammar admits nothing but the schema's objects
    assert set(value) == {"city"} and value["city"] in CITIES


def test_auto_tool_choice_with_the_sdk_on_the_default_model() -> None:
    srv = shared_server()
    plain, (content, calls, finish) = ask(srv, 16)
    choice = plain.choices[0]
    # A random model writes no call block: its text comes back as content, stream and plain alike.
    assert choice.message.tool_calls is None and calls == []
    assert choice.finish_reason == finish and finish in ("stop", "length")
    assert (content or "") == choice.message.content


def test_named_tool_choice_with_the_sdk_on_smollm2() -> None:
    from model_fixtures import SMOLLM2_NAME, smollm2_dir
    from server_fixtures import start_thread_server

    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.server import AsyncEngine

    model_dir = smollm2_dir()  # skips when it cannot be fetched
    engine = LLMEngine(EngineConfig(model=str(model_dir), num_kv_blocks=256, max_model_len=2048, max_num_seqs=4))
    srv = start_thread_server(AsyncEngine(engine))
    try:
        assert srv.state.model_name == SMOLLM2_NAME
        plain, streamed = ask(srv, 40, tool_choice=NAMED)
        arguments = check_forced_call(plain, streamed)
        assert json.loads(arguments)["city"] in CITIES
    finally:
        srv.stop()
