"""What a constraint is checked for before anything compiles it: output at all (``grammar_prune``), size
(``grammar_build``), and which JSON schema keywords the library leaves unenforced (``schema_support``).

The keyword list is pinned against xgrammar itself: every keyword listed as unenforced comes with a
document that breaks it and that the library's grammar still accepts, and every keyword assumed
enforced with a document the grammar rejects; a library upgrade that changes either fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
import xgrammar
from xgrammar.testing import _is_grammar_accept_string

from agent_engine.engine.grammar_build import EMPTY, INVALID, TOO_LARGE, GrammarRefused, prepare_grammar
from agent_engine.engine.grammar_prune import ExprType, SerializedGrammar
from agent_engine.engine.schema_support import unenforced
from scheduler import StructuredSpec

pytestmark = pytest.mark.core

CYCLE = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
NOTHING = r"[^\s\S]"


def _accepts(grammar: xgrammar.Grammar, text: str) -> bool:
    """Whether ``text`` is a whole output of ``grammar``."""
    return bool(_is_grammar_accept_string(grammar, text))


_ASCII = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([chr(i) for i in range(32, 127)]), max_threads=1)


def _starts(grammar: xgrammar.Grammar, text: str) -> bool:
    """Whether an output of ``grammar`` may begin with ``text`` (what the token mask lets a model write)."""
    matcher = xgrammar.GrammarMatcher(_ASCII.compile_grammar(grammar), terminate_without_stop_token=True)
    return bool(matcher.accept_string(text))


def _prepared(spec: StructuredSpec) -> xgrammar.Grammar:
    return xgrammar.Grammar.deserialize_json(prepare_grammar(spec))


# ---- constraints that admit no output --------------------------------------------------------------
@pytest.mark.parametrize("spec", [
    StructuredSpec.json(CYCLE),
    StructuredSpec.regex(NOTHING),
    StructuredSpec.grammar("root ::= root"),
    StructuredSpec.grammar('root ::= "a" root'),  # only infinite strings
    StructuredSpec.json({"type": "object", "properties": {"s": {"type": "string", "pattern": NOTHING}},
                         "required": ["s"]}),
    StructuredSpec.json({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}),
], ids=["ref-cycle", "empty-regex", "root-root", "infinite", "required-empty-pattern", "required-self"])
def test_a_constraint_that_admits_no_output_is_refused(spec: StructuredSpec) -> None:
    with pytest.raises(GrammarRefused, match="admits no output") as exc:
        prepare_grammar(spec)
    assert exc.value.code == EMPTY


def test_a_branch_that_cannot_finish_is_pruned_and_the_rest_kept() -> None:
    """An optional property whose value cannot be produced is a trap for the token mask: it is dropped,
    so no output can walk into it; the other property still works."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": NOTHING},
                                               "x": {"$ref": "#/$defs/loop"}, "n": {"type": "integer"}},
              "$defs": {"loop": {"$ref": "#/$defs/loop"}}, "additionalProperties": False}
    raw = xgrammar.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=False)
    pruned = _prepared(StructuredSpec.json(schema))
    assert _starts(raw, '{"s') and _starts(raw, '{"x')  # the library alone lets an output start them
    assert not _starts(pruned, '{"s') and not _starts(pruned, '{"x')
    assert _accepts(pruned, '{"n": 3}') and _accepts(pruned, "{}")


def test_tool_calls_whose_arguments_match_nothing() -> None:
    """Under ``auto`` a call opens on its trigger: if no offered tool could complete it, the request is
    refused; a dead tool beside a live one just cannot be called."""
    from agent_engine.server.tools import parse_tool_choice
    from agent_engine.server.tools.constrain import call_constraint
    from agent_engine.server.tools.parser import FAMILIES

    def tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    dead = tool("run", {"type": "object", "properties": {"cmd": {"type": "string", "pattern": NOTHING}},
                        "required": ["cmd"]})
    live = tool("ls", {"type": "object", "properties": {"path": {"type": "string"}}})
    for tools in ([dead], [dead, live]):
        for choice in ("auto", "required"):
            spec = call_constraint(FAMILIES["hermes"], tools, parse_tool_choice(choice, tools))
            if len(tools) == 1:
                with pytest.raises(GrammarRefused, match="admits no output") as exc:
                    prepare_grammar(spec)
                assert exc.value.code == EMPTY
                continue
            grammar = xgrammar.Grammar.deserialize_json(prepare_grammar(spec))
            opening = ('<tool_call>\n' if choice == "auto" else "") + '{"name": '  # forced: the prompt opened it
            assert _starts(grammar, opening + '"ls"') and not _starts(grammar, opening + '"run"')


def test_a_productive_grammar_is_left_unchanged() -> None:
    spec = StructuredSpec.json({"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}},
                                "required": ["v"]})
    assert prepare_grammar(spec) == xgrammar.Grammar.from_json_schema(spec.value, any_whitespace=False,
                                                                      strict_mode=False).serialize_json()


def test_the_serialized_grammar_format_is_the_one_read() -> None:
    """xgrammar 0.2.8's ``v16`` layout: ``root ::= ("a" | [b-c]) r{2,3}`` in the expression types read."""
    g = SerializedGrammar.parse(xgrammar.Grammar.from_ebnf('root ::= ("a" | [b-c]) r{2,3}\nr ::= "x"*').serialize_json())
    kinds = {e[0] for e in g.exprs}
    assert {ExprType.BYTE_STRING, ExprType.CHARACTER_CLASS, ExprType.SEQUENCE, ExprType.CHOICES,
            ExprType.REPEAT, ExprType.RULE_REF} <= kinds
    assert [e for e in g.exprs if e[0] == ExprType.CHARACTER_CLASS] == [[ExprType.CHARACTER_CLASS, 0, 98, 99]]
    assert g.rule_names[g.root] == "root"
    assert SerializedGrammar.parse(g.dump()).exprs == g.exprs


# ---- size and validity -------------------------------------------------------------------------------
def test_a_grammar_past_the_size_cap_is_refused_before_compiling() -> None:
    spec = StructuredSpec.json({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(5000)}})
    with pytest.raises(GrammarRefused, match="more than the 200,000 .*--max-grammar-size") as exc:
        prepare_grammar(spec)
    assert exc.value.code == TOO_LARGE
    prepare_grammar(StructuredSpec.json({"type": "object", "properties": {"p0": {"type": "integer"}}}), max_size=10**6)


def test_a_malformed_grammar_is_refused_as_invalid() -> None:
    with pytest.raises(GrammarRefused, match="invalid grammar") as exc:
        prepare_grammar(StructuredSpec.grammar("root ::= "))
    assert exc.value.code == INVALID


# ---- keywords the library does not enforce -----------------------------------------------------------
INT, STR = {"type": "integer"}, {"type": "string"}
AB = {"type": "object", "properties": {"a": INT, "b": INT}}
# (keyword reported, schema, a document that breaks the keyword)
UNENFORCED: list[tuple[str, dict[str, Any], str]] = [
    ("not", {"type": "integer", "not": {"const": 1}}, "1"),
    ("if", {**AB, "if": {"required": ["a"]}, "then": {"required": ["b"]}}, '{"a": 1}'),
    ("dependentRequired", {**AB, "dependentRequired": {"a": ["b"]}}, '{"a": 1}'),
    ("dependentSchemas", {**AB, "dependentSchemas": {"a": {"required": ["b"]}}}, '{"a": 1}'),
    ("dependencies", {**AB, "dependencies": {"a": ["b"]}}, '{"a": 1}'),
    ("contains", {"type": "array", "items": INT, "contains": {"const": 5}}, "[1]"),
    ("uniqueItems", {"type": "array", "items": INT, "uniqueItems": True}, "[1, 1]"),
    ("additionalItems", {"type": "array", "prefixItems": [INT], "additionalItems": False}, "[1, 2]"),
    ("unevaluatedProperties", {"type": "object", "properties": {"a": INT}, "unevaluatedProperties": False}, '{"b": 1}'),
    ("allOf", {"allOf": [STR, INT]}, "1"),
    ("oneOf", {"oneOf": [INT, {"type": "number"}]}, "1"),
    ("multipleOf", {"type": "number", "multipleOf": 0.5}, "0.3"),
    ("format", {"type": "string", "format": "my-format"}, '"x"'),
    ("format", {"type": "string", "format": "idn-email"}, '"x"'),
    ("minLength/maxLength", {"type": "string", "pattern": "^a+$", "minLength": 3}, '"a"'),
    ("patternProperties", {"type": "object", "properties": {"a": INT}, "patternProperties": {"^x": INT}}, '{"xa": "s"}'),
    ("required", {"type": "object", "required": ["a"]}, "{}"),
    ("$ref", {"$ref": "https://example.com/schema.json"}, '"anything"'),
    ("$ref", {"$defs": {"x": INT}, "$ref": "#/$defs/x", "minimum": 5}, "4"),
]
# (schema, a document that breaks it): enforced, so nothing is reported
ENFORCED: list[tuple[dict[str, Any], str]] = [
    ({"type": "integer", "multipleOf": 3}, "4"),
    ({"type": "string", "format": "email"}, '"nope"'),
    ({"type": "string", "format": "date-time"}, '"nope"'),
    ({"type": "object", "patternProperties": {"^x": INT}}, '{"xa": "s"}'),
    ({"type": "object", "properties": {"a": INT}, "patternProperties": {"^x": INT}, "additionalProperties": False},
     '{"b": 1}'),
    ({"type": "object", "propertyNames": {"pattern": "^a"}}, '{"b": 1}'),
    ({"type": "object", "minProperties": 1}, "{}"),
    ({"type": "array", "prefixItems": [INT], "items": False}, "[1, 2]"),
    ({"type": "array", "items": INT, "minItems": 2, "maxItems": 3}, "[1]"),
    ({"type": "string", "maxLength": 2}, '"abc"'),
    ({"type": "number", "minimum": 1.5, "exclusiveMaximum": 3}, "1.0"),
    ({"anyOf": [{"type": "integer", "minimum": 5}, STR]}, "4"),
    ({"allOf": [{"type": "integer", "minimum": 5}]}, "4"),
    ({"$defs": {"x": INT}, "$ref": "#/$defs/x", "description": "d"}, '"s"'),
    ({"type": "object", "properties": {"a": INT}, "required": ["a"], "additionalProperties": False}, "{}"),
]


def _grammar(schema: dict[str, Any]) -> xgrammar.Grammar:
    return xgrammar.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=False)


@pytest.mark.parametrize(("keyword", "schema", "breaking"), UNENFORCED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(UNENFORCED)])
def test_each_unenforced_keyword_is_really_ignored_and_reported(keyword: str, schema: dict[str, Any],
                                                                breaking: str) -> None:
    assert _accepts(_grammar(schema), breaking), "the library enforces it now: drop it from schema_support"
    assert keyword in [u.keyword for u in unenforced(schema)]


@pytest.mark.parametrize(("schema", "breaking"), ENFORCED, ids=[str(i) for i in range(len(ENFORCED))])
def test_enforced_keywords_are_not_reported(schema: dict[str, Any], breaking: str) -> None:
    assert not _accepts(_grammar(schema), breaking)
    assert unenforced(schema) == []


def test_reports_carry_the_json_pointer_of_their_subschema() -> None:
    schema = {"type": "object", "properties": {"a/b": {"type": "array", "items": {"not": {"const": 1}}},
                                               "c": {"anyOf": [{"type": "string", "format": "x"}]}},
              "$defs": {"d": {"uniqueItems": True}}}
    got = {(u.keyword, u.path) for u in unenforced(schema)}
    assert got == {("not", "/properties/a~1b/items"), ("format", "/properties/c/anyOf/0"),
                   ("uniqueItems", "/$defs/d")}
    deep: dict[str, Any] = {"not": {}}
    for _ in range(5000):  # no recursion limit
        deep = {"items": deep}
    assert unenforced(deep)[0].path == "/items" * 5000
