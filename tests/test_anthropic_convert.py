"""The Anthropic Messages API without a server: Anthropic -> chat-form conversion, engine output ->
content blocks and stop reasons, and the streamed events (which must add up to the full body however
the output is cut, tool calls included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from agent_engine.engine.outputs import CompletionOutput, RequestOutput
from agent_engine.server.anthropic.convert import (
    reply_blocks,
    split_stop,
    stop_reason,
    to_anthropic_id,
    to_chat_form,
    to_openai_id,
    usage,
)
from agent_engine.server.anthropic.reply import MessagesCall, message_body
from agent_engine.server.anthropic.schema import MessagesRequest, cache_ttl_hint
from agent_engine.server.anthropic.streaming import BlockWriter, StreamProgress, stream_events
from agent_engine.server.tools import ToolChoice, make_tool_parser

pytestmark = pytest.mark.core

MODEL = "any-model"
TOOL = {"name": "get_weather", "description": "Weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _req(**kw: Any) -> MessagesRequest:
    return MessagesRequest.model_validate(
        {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **kw})


# ---- conversion: Anthropic -> chat form --------------------------------------------------------------

def test_conversation_converts_to_openai_messages():
    req = _req(system=[{"type": "text", "text": "be brief"}, {"type": "text", "text": "be kind"}],
               tools=[TOOL], tool_choice={"type": "any"}, messages=[
                   {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                   {"role": "assistant", "content": [
                       {"type": "thinking", "thinking": "hmm", "signature": "s"},
                       {"type": "text", "text": "Let me look."},
                       {"type": "tool_use", "id": "toolu_abc", "name": "get_weather", "input": {"city": "Oslo"}}]},
                   {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "toolu_abc", "content": "rain", "is_error": True},
                       {"type": "text", "text": "and tomorrow?"}]}])
    form = to_chat_form(req)
    assert form.messages == [
        {"role": "system", "content": "be brief\nbe kind"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "Error: rain"},
        {"role": "user", "content": "and tomorrow?"},
    ]
    assert form.tools == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city", "parameters": TOOL["input_schema"]}}]
    assert form.tool_choice == "required" and form.prefill == ""


@pytest.mark.parametrize(("choice", "expected"), [
    (None, None), ({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none"),
    ({"type": "tool", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
])
def test_tool_choice_maps_to_openai(choice, expected):
    kw = {"tools": [TOOL]} if choice is None else {"tools": [TOOL], "tool_choice": choice}
    assert to_chat_form(_req(**kw)).tool_choice == expected


def test_tool_only_assistant_turn_has_null_content_and_prefill_is_kept():
    form = to_chat_form(_req(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "assistant", "content": "The answer is"}]))
    assert form.messages[1]["content"] is None and form.messages[2] == {
        "role": "tool", "tool_call_id": "call_1", "content": ""}
    assert form.prefill == "The answer is" and form.messages[-1]["role"] == "tool"


def test_bad_conversations_raise_value_error():
    orphan = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}]
    with pytest.raises(ValueError, match="no matching tool_use"):
        to_chat_form(_req(messages=orphan))
    with pytest.raises(ValueError, match="tool_use blocks belong in assistant"):
        to_chat_form(_req(messages=[{"role": "user", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]))
    with pytest.raises(ValueError, match="prefill"):
        to_chat_form(_req(tools=[TOOL], tool_choice={"type": "any"},
                          messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]))


def test_cache_control_ttl_is_a_hint_only_when_explicit():
    assert cache_ttl_hint(_req(system=[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}])) is None
    req = _req(tools=[{**TOOL, "cache_control": {"type": "ephemeral", "ttl": "5m"}}], messages=[
        {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}])
    assert cache_ttl_hint(req) == 3600.0


# ---- conversion: engine output -> Anthropic ----------------------------------------------------------

@dataclass
class _Call:
    id: str
    name: str
    arguments: str


def test_reply_blocks_ids_and_stop_reasons():
    blocks = reply_blocks("Sure. ", [_Call("call_7", "get_weather", '{"city": "Rome"}'), _Call("call_8", "f", "[1]")])
    assert blocks == [{"type": "text", "text": "Sure. [1]"},
                      {"type": "tool_use", "id": "toolu_7", "name": "get_weather", "input": {"city": "Rome"}},
                      {"type": "tool_use", "id": "toolu_8", "name": "f", "input": {}}]
    assert reply_blocks(None, []) == [] and reply_blocks("", []) == []
    assert to_openai_id(to_anthropic_id("call_x1")) == "call_x1" and to_anthropic_id("other") == "other"
    assert stop_reason("length", None, False) == "max_tokens"
    assert stop_reason("stop", None, False) == "end_turn"
    assert stop_reason("stop", "END", False) == "stop_sequence"
    assert stop_reason("length", None, True) == "max_tokens"  # cut short, even after a whole call
    assert split_stop("abcEND", "stop", ["D", "END"]) == ("abc", "END")
    assert split_stop("abcEND", "length", ["END"]) == ("abcEND", None)
    assert usage(100, 64, 7) == {"input_tokens": 36, "output_tokens": 7, "cache_read_input_tokens": 64,
                                 "cache_creation_input_tokens": 0}


def test_block_writer_indexes_and_closes_blocks():
    w = BlockWriter()
    w.text("a")
    w.text("")
    w.tool_start("call_1", "f")
    w.tool_arguments('{"x"')
    w.tool_arguments(": 1}")
    w.text("b")
    w.close()
    got = [(name, d.get("index"), d.get("delta", d.get("content_block", {})).get("type")) for name, d in w.take()]
    assert got == [
        ("content_block_start", 0, "text"), ("content_block_delta", 0, "text_delta"), ("content_block_stop", 0, None),
        ("content_block_start", 1, "tool_use"), ("content_block_delta", 1, "input_json_delta"),
        ("content_block_delta", 1, "input_json_delta"), ("content_block_stop", 1, None),
        ("content_block_start", 2, "text"), ("content_block_delta", 2, "text_delta"), ("content_block_stop", 2, None),
    ]
    assert w.tool_use and w.take() == []


def _outputs(text: str, cuts: list[int], finish: str = "stop") -> list[RequestOutput]:
    """The engine outputs of ``text`` arriving in pieces ending at ``cuts`` (cumulative, like the engine)."""
    outs, start = [], 0
    for end in [*cuts, len(text)]:
        done = end == len(text)
        comp = CompletionOutput(0, text[:end], list(range(end)), finish if done else None)
        outs.append(RequestOutput("r", None, [1, 2, 3], [comp], done, new_text=text[start:end]))
        start = end
    return outs


def _rebuild(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The message a client accumulates from stream events (what the SDK's stream helper does)."""
    message: dict[str, Any] = {}
    args: dict[int, str] = {}
    for name, data in events:
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                args[data["index"]] = args.get(data["index"], "") + delta["partial_json"]
        elif name == "message_delta":
            message.update(data["delta"], usage=data["usage"])
    for i, text in args.items():
        message["content"][i]["input"] = json.loads(text)
    return message


HERMES_OUTPUT = 'Checking. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


@pytest.mark.parametrize(("choice", "text"), [
    (None, HERMES_OUTPUT),
    (None, "no call <tool_call>{broken</tool_call> here"),
    (ToolChoice("named", "get_weather"), '{"city": "Oslo"}}\n</tool_call>'),
    (ToolChoice("named", "get_weather"), "not json at all"),
])
def test_streamed_tool_use_adds_up_to_the_body_at_every_cut(choice, text):
    req = _req(tools=[TOOL])
    parser = make_tool_parser("hermes", None, choice)
    final = _outputs(text, [])[-1]
    call = MessagesCall(req, to_chat_form(req), MODEL, parser=parser)
    body = message_body(call, final)
    assert body["stop_reason"] == ("tool_use" if choice or "Oslo" in text else "end_turn")
    for cut in range(len(text) + 1):
        p = StreamProgress(parser=parser.stream())
        events = [e for out in _outputs(text, [cut] if 0 < cut < len(text) else []) for e in stream_events(call, out, p)]
        got = _rebuild(events)
        for block in got["content"] + body["content"]:
            block.pop("id", None)  # call ids are fresh per parse
        assert got["content"] == [{k: v for k, v in b.items() if k != "id"} for b in body["content"]], cut
        assert got["stop_reason"] == body["stop_reason"]


def test_forced_call_in_a_body():
    req = _req(tools=[TOOL], tool_choice={"type": "tool", "name": "get_weather"})
    call = MessagesCall(req, to_chat_form(req), MODEL, parser=make_tool_parser("hermes", None,
                                                                               ToolChoice("named", "get_weather")))
    body = message_body(call, _outputs('{"city": "Oslo"}}\n</tool_call>', [])[-1])
    assert [b["type"] for b in body["content"]] == ["tool_use"]
    assert body["content"][0]["name"] == "get_weather" and body["content"][0]["input"] == {"city": "Oslo"}
    assert body["content"][0]["id"].startswith("toolu_") and body["stop_sequence"] is None

