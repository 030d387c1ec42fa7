"""End-to-end Messages API tests: the official ``anthropic`` SDK against the real server (embedded model).

``messages.create`` plain and with stop sequences, ``messages.stream`` (the SDK accumulates our events
into the same message), prefix-cache usage, count_tokens, and a forced ``tool_use`` turn whose tool the
engine's estimator records; then one server subprocess on SmolLM2-135M-Instruct (a real chat model).
Slow: the servers load real models (fast checks on a fake engine: ``test_anthropic_api``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest
from model_fixtures import SMOLLM2_NAME, smollm2_dir
from server_fixtures import shared_server, start_subprocess_server

from agent_engine.server.anthropic.convert import ChatForm, to_chat_form
from agent_engine.server.anthropic.routes import prompt_of, tool_plan
from agent_engine.server.anthropic.schema import MessagesRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PROMPT = "Write a function that adds two numbers."
GREEDY = {"temperature": 0.0}  # sent as an extra field: this SDK version has no sampling arguments


@pytest.fixture(scope="module")
def srv():
    return shared_server()


@pytest.fixture(scope="module")
def client(srv):
    return anthropic.Anthropic(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=60)


def _create(client, srv, **kw):
    kw.setdefault("messages", [{"role": "user", "content": PROMPT}])
    return client.messages.create(model=srv.engine.model_name, max_tokens=kw.pop("max_tokens", 12),
                                  extra_body=GREEDY, **kw)


def test_create_plain_and_stream_agree(client, srv):
    msg = _create(client, srv)
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert msg.stop_reason in ("max_tokens", "end_turn") and msg.usage.output_tokens >= 1
    text = "".join(b.text for b in msg.content if b.type == "text")
    with client.messages.stream(model=srv.engine.model_name, max_tokens=12, extra_body=GREEDY,
                                messages=[{"role": "user", "content": PROMPT}]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text and final.stop_reason == msg.stop_reason
    assert final.usage.output_tokens == msg.usage.output_tokens
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) == \
        msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0)


def test_prefix_cache_counts_as_cache_read(client, srv):
    system = "You are a careful assistant. " * 12  # several KV blocks of shared prefix
    first = _create(client, srv, system=system, max_tokens=2)
    second = _create(client, srv, system=system, max_tokens=2)
    total = client.messages.count_tokens(model=srv.engine.model_name, system=system,
                                         messages=[{"role": "user", "content": PROMPT}]).input_tokens
    assert first.usage.input_tokens + first.usage.cache_read_input_tokens == total
    assert second.usage.cache_read_input_tokens > 0
    assert second.usage.input_tokens == total - second.usage.cache_read_input_tokens


def test_stop_sequence_is_named_and_cut(client, srv):
    text = "".join(b.text for b in _create(client, srv, max_tokens=24).content)
    stop = text[len(text) // 2:len(text) // 2 + 3]
    if not stop.strip() or text.index(stop) == 0:
        pytest.skip(f"greedy output has no usable stop sequence: {text!r}")
    msg = _create(client, srv, max_tokens=24, stop_sequences=[stop])
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == stop
    assert "".join(b.text for b in msg.content) == text[:text.index(stop)]
    with client.messages.stream(model=srv.engine.model_name, max_tokens=24, extra_body=GREEDY,
                                stop_sequences=[stop], messages=[{"role": "user", "content": PROMPT}]) as s:
        assert "".join(s.text_stream) == text[:text.index(stop)]
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_errors_are_sdk_exceptions(client, srv):
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-not-here", max_tokens=4, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.BadRequestError) as info:
        _create(client, srv, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    assert info.value.body["error"]["type"] == "invalid_request_error"


WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Paris", "Lima"]}},
                            "required": ["city"]}}  # an enum: even a random model's forced call ends in budget


def test_tool_conversation_renders_with_the_chat_renderer(srv):
    """The embedded model's ChatML template knows no tools: calls and results are written inline as
    hermes text, a forced call ends the prompt with its opening, and a prefill follows the prompt."""
    req = MessagesRequest.model_validate({
        "model": "m", "max_tokens": 4, "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "get_weather"},
        "messages": [{"role": "user", "content": "weather?"},
                     {"role": "assistant", "content": [
                         {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]}]})
    form = to_chat_form(req)
    plan = tool_plan(form, None)
    text = prompt_of(form, plan)(srv.engine)
    assert '"name": "get_weather"' in text and "Oslo" in text and "rain" in text
    assert text.endswith(plan.parser.prefix) and plan.parser.prefix.startswith("<tool_call>")
    plain = ChatForm([{"role": "user", "content": "hi"}], None, None, prefill="Sure,")
    text = prompt_of(plain, tool_plan(plain, None))(srv.engine)
    assert text == srv.engine.tokenizer.apply_chat_template(plain.messages, add_generation_prompt=True,
                                                            tokenize=False) + "Sure,"


def test_forced_tool_use_round_trip_reaches_the_estimator(client, srv):
    """A forced tool_use turn (plain), its tool named in the estimator, then the tool_result turn (streamed)."""
    job = "anthropic-sdk-tool-job"
    kw = {"model": srv.engine.model_name, "max_tokens": 32, "tools": [WEATHER], "extra_body": GREEDY,
          "tool_choice": {"type": "tool", "name": "get_weather"},
          "extra_headers": {"X-Claude-Code-Session-Id": job}}
    user = {"role": "user", "content": "What is the weather in Oslo?"}
    msg = client.messages.create(messages=[user], **kw)
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert msg.stop_reason == "tool_use" and len(uses) == 1 and uses[0].name == "get_weather"
    assert isinstance(uses[0].input, dict) and uses[0].id.startswith("toolu_")
    srv.wait_idle()  # the engine thread has nothing to change: its estimator may be read from here
    pending = srv.engine.job_hooks.estimator.jobs.peek(job).pending
    assert pending is not None and pending.tool_name == "get_weather"
    history = [user, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"}]}]
    with client.messages.stream(messages=history, **kw) as stream:
        final = stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and [u.name for u in uses] == ["get_weather"]
    assert final.usage.cache_read_input_tokens > 0  # the first turn's prompt is a cached prefix


@pytest.fixture(scope="module")
def smollm2_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    log: Path = tmp_path_factory.mktemp("smollm2-server") / "server.log"
    proc = start_subprocess_server(["--model", str(smollm2_dir()), "--num-kv-blocks", "256",
                                    "--max-model-len", "2048"], log)
    try:
        yield anthropic.Anthropic(base_url=proc.base_url, api_key="unused", max_retries=0, timeout=120)
    finally:
        proc.stop(timeout=10)


def test_smollm2_plain_stream_and_tool_use(smollm2_client):
    client = smollm2_client
    kw = {"model": SMOLLM2_NAME, "max_tokens": 24, "extra_body": GREEDY, "system": "Answer briefly.",
          "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    msg = client.messages.create(**kw)
    text = "".join(b.text for b in msg.content if b.type == "text")
    assert text.strip() and msg.stop_reason in ("end_turn", "max_tokens")
    with client.messages.stream(**kw) as stream:
        assert "".join(stream.text_stream) == text
    forced = client.messages.create(**{**kw, "max_tokens": 48, "tools": [WEATHER],
                                       "tool_choice": {"type": "tool", "name": "get_weather"}})
    uses = [b for b in forced.content if b.type == "tool_use"]
    assert forced.stop_reason == "tool_use" and [u.name for u in uses] == ["get_weather"]
    assert isinstance(uses[0].input, dict)
