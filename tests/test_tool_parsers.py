"""Tool-call parsers: every family whole and streamed (cut at every character), malformed output kept as
text, forced openings, tool_choice validation and family selection."""

from __future__ import annotations

import json
import re

import pytest

from agent_engine.server.tools import (
    FAMILIES,
    ParsedOutput,
    ToolChoice,
    assemble,
    chunk_delta,
    detect_family,
    make_tool_parser,
    openai_tool_calls,
    parse_tool_choice,
)
from agent_engine.server.tools.parser import ToolParser

pytestmark = pytest.mark.core

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("get_weather", "bash")]


def parser(family: str, choice: ToolChoice | None = None) -> ToolParser:
    return make_tool_parser(family, None, choice)


def shape(out: ParsedOutput) -> tuple[str | None, list[tuple[str, dict]]]:
    """Content and (name, arguments) of an output; arguments decoded so spacing does not matter."""
    return out.content, [(c.name, json.loads(c.arguments)) for c in out.tool_calls]


def streamed(p: ToolParser, pieces: list[str]) -> ParsedOutput:
    s = p.stream()
    events = [e for piece in pieces for e in s.feed(piece)] + s.finish()
    starts = [e.index for e in events if e.kind == "tool_start"]
    assert starts == list(range(len(starts)))  # calls start in order, each once
    for e in events:
        if e.kind == "tool_args":
            assert e.index in starts[: e.index + 1]  # arguments only after their call started
    return assemble(events)


def assert_split_invariant(p: ToolParser, text: str) -> ParsedOutput:
    """Whole, character by character and cut in two at every boundary: the same content and calls."""
    whole = p.parse(text)
    raw = (whole.content, [(c.name, c.arguments) for c in whole.tool_calls])
    cuts = [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]
    for pieces in cuts:
        got = streamed(p, pieces)
        assert (got.content, [(c.name, c.arguments) for c in got.tool_calls]) == raw, pieces
    return whole


CASES = {
    "hermes": [
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
         (None, [("get_weather", {"city": "Paris"})])),
        ('Let me check.\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
         '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}</tool_call>  ',
         ("Let me check.", [("bash", {"command": "ls"}), ("get_weather", {"city": "Rome"})])),
        ('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b"}]</tool_call> done',
         ("done", [("a", {}), ("b", {})])),
        ('<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}', (None, [("bash", {"command": "pwd"})])),
        ("no calls here, just <b>html</b> and a < sign", ("no calls here, just <b>html</b> and a < sign", [])),
    ],
    "llama3_json": [
        ('{"name": "get_weather", "parameters": {"city": "Oslo"}}', (None, [("get_weather", {"city": "Oslo"})])),
        ('<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {}}',
         (None, [("a", {"x": 1}), ("b", {})])),
        ("The answer is {42}.", ("The answer is {42}.", [])),
    ],
    "mistral": [
        ('[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls -la"}}]',
         (None, [("bash", {"command": "ls -la"})])),
        ('Sure. [TOOL_CALLS] [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"k": [1, 2]}}]',
         ("Sure.", [("a", {}), ("b", {"k": [1, 2]})])),
        ('[{"name": "a", "arguments": {"q": "x"}}]', (None, [("a", {"q": "x"})])),
    ],
    "pythonic": [
        ('[get_weather(city="Paris", days=3), bash(command=\'ls\')]',
         (None, [("get_weather", {"city": "Paris", "days": 3}), ("bash", {"command": "ls"})])),
        ("[f(flag=true, none=null, xs=[1, 2.5], d={'a': False})]",
         (None, [("f", {"flag": True, "none": None, "xs": [1, 2.5], "d": {"a": False}})])),
        ("[noargs()]", (None, [("noargs", {})])),
        ("Plain answer.", ("Plain answer.", [])),
    ],
}


@pytest.mark.parametrize("family,text,expected",
                         [(f, t, e) for f, cases in CASES.items() for t, e in cases])
def test_family_parses_whole_and_streamed_alike(family: str, text: str, expected: tuple) -> None:
    p = parser(family)
    out = assert_split_invariant(p, text)
    assert shape(out) == expected
    for call in out.tool_calls:
        assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert len({c.id for c in out.tool_calls}) == len(out.tool_calls)


MALFORMED = {
    "hermes": ['<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call> after',
               "before <tool_call>not json at all</tool_call>",
               '<tool_call>{"arguments": {}}</tool_call>',  # no name
               '<tool_call>{"name": "x", "arguments": [1]}</tool_call>',  # arguments not an object
               '<tool_call>{"name": "bash", "argum'],  # cut off
    "llama3_json": ['{"name": "a", "parameters": {"x": 1}} and then prose', '{"name": "a", "parameters": {'],
    "mistral": ['[TOOL_CALLS][{"name": "a", "arguments": {]', "[1, 2, 3] are numbers"],
    "pythonic": ["[f(1, 2)]", "[os.system(cmd='rm')]", "[__import__('os').system('ls')]", "[f(x=g())]",
                 "[f(x=1)"],
}


@pytest.mark.parametrize("family,text", [(f, t) for f, ts in MALFORMED.items() for t in ts])
def test_malformed_calls_stay_text(family: str, text: str) -> None:
    out = assert_split_invariant(parser(family), text)
    assert out.tool_calls == []
    assert out.content == text.strip()  # nothing lost


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_format_then_parse_round_trips(family: str) -> None:
    calls = [("get_weather", '{"city": "Paris", "n": [1, true, null]}'), ("bash", {"command": "echo 'hi'"})]
    text = FAMILIES[family].format_calls(calls)
    out = assert_split_invariant(parser(family), text)
    assert shape(out) == (None, [("get_weather", {"city": "Paris", "n": [1, True, None]}),
                                 ("bash", {"command": "echo 'hi'"})])


@pytest.mark.parametrize("family,output", [
    ("hermes", '{"city": "Paris"}}\n</tool_call>'),
    ("llama3_json", '{"city": "Paris"}}'),
    ("mistral", '{"city": "Paris"}}]'),
    ("pythonic", 'city="Paris")]'),
])
def test_forced_call_reads_the_prompt_opening(family: str, output: str) -> None:
    p = parser(family, ToolChoice("named", "get_weather"))
    assert p.prefix and "get_weather" in p.prefix
    out = assert_split_invariant(p, output)
    assert shape(out) == (None, [("get_weather", {"city": "Paris"})])


def test_forced_call_keeps_what_the_model_wrote() -> None:
    p = parser("hermes", ToolChoice("named", "bash"))
    out = assert_split_invariant(p, "zq9 ]]{ x")  # not JSON: the call stays, its arguments are raw text
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("bash", "zq9 ]]{ x")] and out.content is None
    out = assert_split_invariant(p, '{"command": "ls"} } trailing words')
    assert shape(out) == ("trailing words", [("bash", {"command": "ls"})])
    assert [(c.name, c.arguments) for c in p.parse("").tool_calls] == [("bash", "{}")]


def test_required_choice_opens_any_call() -> None:
    p = parser("hermes", ToolChoice("required"))
    assert p.prefix == "<tool_call>\n"
    out = assert_split_invariant(p, '{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>')
    assert shape(out) == (None, [("bash", {"command": "ls"})])
    bad = p.parse("plain words")
    assert bad.tool_calls == [] and bad.content == "<tool_call>\nplain words"


def test_stream_events_and_wire_format() -> None:
    s = parser("hermes").stream()
    events = s.feed("Hi <tool_")
    assert [e.text for e in events] == ["Hi"]  # the possible marker is held back
    events = s.feed('call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>')
    text, entries = chunk_delta(events)
    assert text == "" and entries == [{"index": 0, "id": entries[0]["id"], "type": "function",
                                       "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]
    assert s.feed("  ") == [] and s.finish() == []  # trailing blanks are dropped
    parsed = parser("hermes").parse('<tool_call>{"name": "bash", "arguments": {}}</tool_call>')
    assert openai_tool_calls(parsed.tool_calls)[0]["function"] == {"name": "bash", "arguments": "{}"}


def test_parse_tool_choice_forms_and_errors() -> None:
    assert parse_tool_choice(None, TOOLS) == ToolChoice("auto")
    assert parse_tool_choice(None, None) == ToolChoice("none") == parse_tool_choice("auto", [])
    assert parse_tool_choice("none", TOOLS) == ToolChoice("none") and not ToolChoice("none").parses
    assert parse_tool_choice("required", TOOLS) == ToolChoice("required")
    assert parse_tool_choice("required", TOOLS[:1]) == ToolChoice("named", "get_weather")
    named = {"type": "function", "function": {"name": "bash"}}
    assert parse_tool_choice(named, TOOLS) == ToolChoice("named", "bash")
    bad = [("always", TOOLS, "must be one of"), ("required", None, "needs tools"),
           ({"type": "function", "function": {"name": "rm"}}, TOOLS, "not in tools"),
           ({"type": "custom", "function": {"name": "bash"}}, TOOLS, "type"),
           ({"type": "function"}, TOOLS, "name"), (3, TOOLS, "string or an object")]
    for value, tools, message in bad:
        with pytest.raises(ValueError, match=message):
            parse_tool_choice(value, tools)


def test_family_selection() -> None:
    with pytest.raises(ValueError, match="known: auto, hermes, llama3_json, mistral, pythonic"):
        make_tool_parser("nope", None)
    assert make_tool_parser("llama3-json", None).name == "llama3_json"

    class Tok:
        chat_template = "{{ '<tool_call>' }}"

    assert make_tool_parser(None, Tok()).name == "hermes" and make_tool_parser("auto", None).name == "hermes"
    assert detect_family("... [TOOL_CALLS] ...") == "mistral"
    assert detect_family("{{- '<|python_tag|>' + tool_call.name }}") == "llama3_json"
    assert detect_family("[func_name1(params_name1=params_value1)]") == "pythonic"
    assert detect_family("{{ message['content'] }}") == "hermes"


FRAGMENTS = ["<tool_call>", "</tool_call>", '{"name": "bash", "arguments": {"command": "ls"}}', "[TOOL_CALLS]",
             '[{"name": "a", "arguments": {}}]', "[f(x=1)]", "<|python_tag|>", ";", " ", "\n", "text", "<", "[",
             "{", "}", '"', "<tool", "]", "(", ")"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_outputs_split_anywhere_parse_alike(family: str) -> None:
    import random

    rng = random.Random(f"tools-{family}")
    for _ in range(150):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12)))
        p = parser(family)
        whole = p.parse(text)
        pieces, i = [], 0
        while i < len(text):
            n = rng.randint(1, 6)
            pieces.append(text[i:i + n])
            i += n
        got = streamed(p, pieces)
        assert (got.content, [(c.name, c.arguments) for c in got.tool_calls]) == \
            (whole.content, [(c.name, c.arguments) for c in whole.tool_calls]), text
        kept = (whole.content or "") + "".join(c.name + c.arguments for c in whole.tool_calls)
        assert whole.tool_calls or whole.content == (text.strip() or None)  # no call: all text kept
        assert len(kept) > 0 or not text.strip()
