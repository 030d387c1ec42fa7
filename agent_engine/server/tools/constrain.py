"""The grammar of a chat request's tool calls: what makes a small model's call always parse.

``call_constraint(family, tools, choice, parallel)`` is the ``StructuredSpec`` (a structural tag) the
engine decodes a request's output under, or None when its calls are not constrained:

- A forcing ``tool_choice`` ("required", named; Anthropic "any", "tool"): the prompt already ends
  with the family's forced opening, so the output must be the rest of exactly one call: the name (one
  of the offered tools, or the named one), the arguments under that tool's JSON schema, the family's
  closing text, then end of output.
- "auto": free text until the model writes the family's trigger (``<tool_call>`` for Hermes); from
  there the rest of the call is constrained as above, then free text again (one call at most with
  ``parallel_tool_calls: false``).
- "none", or a family whose calls are not JSON (pythonic): None.

Invariants:
- Every tool's arguments follow its ``parameters`` schema (no schema: any JSON object), ``strict`` or
  not; a schema the grammar library cannot compile is the request's 400, never a crash.
- Arguments have at most ``MAX_WHITESPACE`` blanks in a row (no padding until ``max_tokens``).
- The constant text around the arguments is the family's own (``call_begin`` / ``call_end``), the
  same text its parser reads back, so a constrained call always parses as that call.
- The spec depends only on its inputs, so equal requests share one compiled grammar in the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_engine.json_types import JsonObject, JsonValue
from agent_engine.server.tools.choice import ToolChoice
from agent_engine.server.tools.families import Family
from scheduler import StructuredSpec

ANY_OBJECT: JsonObject = {"type": "object"}
# At most one blank between JSON tokens: enough for the ``{"a": 1, "b": 2}`` that models write, and a
# model can never pad a call with whitespace until ``max_tokens``.
MAX_WHITESPACE = 1


def call_constraint(family: Family, tools: Sequence[Mapping[str, JsonValue]] | None, choice: ToolChoice,
                    parallel: bool = True) -> StructuredSpec | None:
    """The structural tag that the request's calls are decoded under; None when they are not constrained."""
    schemas = tool_schemas(tools)
    if not choice.parses or not schemas or family.call_begin("x") is None:
        return None
    if choice.forces:
        names = [choice.name] if choice.name is not None else list(schemas)
        fmt = _forced_call(family, {n: schemas[n] for n in names}, family.forced_prefix(choice.name))
    else:
        fmt = _triggered_calls(family, schemas, parallel)
    return StructuredSpec.structural_tag({"type": "structural_tag", "format": fmt})


def tool_schemas(tools: Sequence[Mapping[str, JsonValue]] | None) -> dict[str, JsonObject]:
    """Each OpenAI-format tool's name and the schema of its arguments (any JSON object if none)."""
    out: dict[str, JsonObject] = {}
    for tool in tools or ():
        fn = tool.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = dict(params) if isinstance(params, Mapping) else dict(ANY_OBJECT)
    return out


def _forced_call(family: Family, schemas: dict[str, JsonObject], prefix: str) -> JsonObject:
    """One call whose opening up to ``prefix`` is already in the prompt: the rest of it, then its close."""
    options = []
    for name, schema in schemas.items():
        begin = family.call_begin(name) or ""
        if not begin.startswith(prefix):
            raise ValueError(f"the {family.name} forced opening {prefix!r} does not begin a call of {name!r}")
        options.append(_sequence(_const(begin[len(prefix):]), _arguments(schema)))
    body = options[0] if len(options) == 1 else {"type": "or", "elements": options}
    return _sequence(body, _const(family.call_end))


def _triggered_calls(family: Family, schemas: dict[str, JsonObject], parallel: bool) -> JsonObject:
    """Free text in which every call, once its trigger appears, is a whole call of an offered tool."""
    tags = [{"type": "tag", "begin": family.call_begin(name), "content": _arguments(schema),
             "end": family.call_end} for name, schema in schemas.items()]
    return {"type": "triggered_tags", "triggers": [family.trigger], "tags": tags,
            "at_least_one": False, "stop_after_first": not parallel}


def _arguments(schema: JsonObject) -> JsonObject:
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": MAX_WHITESPACE}


def _const(text: str) -> JsonObject | None:
    return {"type": "const_string", "value": text} if text else None


def _sequence(*elements: JsonObject | None) -> JsonObject:
    kept = [e for e in elements if e is not None]
    return kept[0] if len(kept) == 1 else {"type": "sequence", "elements": kept}
