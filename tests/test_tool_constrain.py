"""The grammar of tool calls (``server.tools.constrain``) and outputs cut inside a call.

Each family's call grammar is compiled with the engine's ``StructuredOutputManager`` on the embedded
model's tokenizer and driven token by token: the grammar accepts exactly whole calls of offered tools
with arguments under their schemas, and what it accepts is what the family's parser reads back.
"""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from agent_engine.engine.structured_outputs import StructuredOutputManager
from agent_engine.model.default_model import default_model_dir
from agent_engine.server.tools import parse_tool_choice
from agent_engine.server.tools.constrain import call_constraint, tool_schemas
from agent_engine.server.tools.parser import FAMILIES, ToolParser

pytestmark = pytest.mark.core

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"],
        "additionalProperties": False}
VIEW = {"type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
        "required": ["path"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": BASH}},
         {"type": "function", "function": {"name": "view", "parameters": VIEW, "strict": True}}]
JSON_FAMILIES = ("hermes", "llama3_json", "mistral")


@pytest.fixture(scope="module")
def manager() -> StructuredOutputManager:
    tok = AutoTokenizer.from_pretrained(str(default_model_dir()), local_files_only=True)
    return StructuredOutputManager(tok, len(tok), [tok.eos_token_id])


def _matcher(manager: StructuredOutputManager, spec):  # noqa: ANN001, ANN202
    import xgrammar

    return xgrammar.GrammarMatcher(manager.compile(spec))


def _accepts(manager: StructuredOutputManager, spec, text: str, *, end: bool = True) -> bool:  # noqa: ANN001
    """Whether the grammar takes ``text`` token by token (and then the end of output, if ``end``)."""
    m = _matcher(manager, spec)
    ids = manager.tokenizer.encode(text, add_special_tokens=False)
    if not all(m.accept_token(t) for t in ids):
        return False
    return m.accept_token(manager.eos_token_ids[0]) if end else True


@pytest.mark.parametrize("family", JSON_FAMILIES)
def test_forced_call_grammar_takes_whole_calls_of_offered_tools_only(manager, family: str) -> None:  # noqa: ANN001
    fam = FAMILIES[family]
    for choice_value, name in (("required", "view"), ({"type": "function", "function": {"name": "bash"}}, "bash")):
        choice = parse_tool_choice(choice_value, TOOLS)
        spec = call_constraint(fam, TOOLS, choice)
        prefix = fam.forced_prefix(choice.name)
        args = {"path": "a.py", "line": 3} if name == "view" else {"command": "ls -la"}
        whole = fam.call_begin(name) + json.dumps(args) + fam.call_end
        assert whole.startswith(prefix)
        output = whole[len(prefix):]
        assert _accepts(manager, spec, output)
        parsed = ToolParser(fam, choice).parse(output)
        assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [(name, args)]
        assert not _accepts(manager, spec, output[:-1])  # unfinished: the end of output is refused
        assert not _accepts(manager, spec, output + " more", end=False)  # nothing after the call
    required = call_constraint(fam, TOOLS, parse_tool_choice("required", TOOLS))
    assert not _accepts(manager, required, fam.call_begin("git")[len(fam.forced_prefix(None)):], end=False)
    bad_args = fam.call_begin("bash") + '{"cmd": "ls"}' + fam.call_end
    assert not _accepts(manager, required, bad_args[len(fam.forced_prefix(None)):], end=False)


def test_auto_calls_are_free_text_until_a_call_opens(manager) -> None:  # noqa: ANN001
    fam = FAMILIES["hermes"]
    spec = call_constraint(fam, TOOLS, parse_tool_choice("auto", TOOLS))
    call = fam.call_begin("bash") + '{"command": "ls"}' + fam.call_end
    assert _accepts(manager, spec, "Just prose, no call.")
    assert _accepts(manager, spec, f"Let me look.\n{call}\n{call}")
    assert not _accepts(manager, spec, 'Let me look.\n<tool_call>\n{"name": "git"', end=False)
    assert not _accepts(manager, spec, 'Go.\n<tool_call>\n{"name": "bash", "arguments": {"command": 1}', end=False)
    single = call_constraint(fam, TOOLS, parse_tool_choice("auto", TOOLS), parallel=False)
    assert _accepts(manager, single, f"Go.\n{call}") and not _accepts(manager, single, f"{call}\n{call}", end=False)


def test_no_constraint_without_calls_to_read() -> None:
    hermes = FAMILIES["hermes"]
    assert call_constraint(hermes, TOOLS, parse_tool_choice("none", TOOLS)) is None
    assert call_constraint(hermes, None, parse_tool_choice(None, None)) is None
    assert call_constraint(FAMILIES["pythonic"], TOOLS, parse_tool_choice("required", TOOLS)) is None
    assert tool_schemas([{"type": "function", "function": {"name": "f"}}]) == {"f": {"type": "object"}}
    a = call_constraint(hermes, TOOLS, parse_tool_choice("required", TOOLS))
    assert a == call_constraint(hermes, json.loads(json.dumps(TOOLS)), parse_tool_choice("required", TOOLS))


@pytest.mark.parametrize("family", JSON_FAMILIES)
def test_an_output_cut_inside_a_call_is_content_not_a_call(family: str) -> None:
    fam = FAMILIES[family]
    forced = ToolParser(fam, parse_tool_choice({"type": "function", "function": {"name": "bash"}}, TOOLS))
    cut = '{"command": "ls'
    assert forced.parse(cut).tool_calls  # salvaged when the model stopped on its own
    parsed = forced.parse(cut, truncated=True)
    assert parsed.tool_calls == [] and parsed.content == cut  # without the opening from the prompt
    free = ToolParser(fam)
    whole = fam.format_calls([("bash", {"command": "ls"})])
    text = fam.call_begin("view") + '{"path": "a' if family != "hermes" else f"{whole}\n" + fam.call_begin("view")
    parsed = free.parse(text, truncated=True)
    assert all(c.name == "bash" for c in parsed.tool_calls) and "view" in (parsed.content or "")
    stream = free.stream()
    events = [e for piece in (text[:7], text[7:]) for e in stream.feed(piece)] + stream.finish(truncated=True)
    assert not any(e.kind == "tool_start" and e.name == "view" for e in events)
