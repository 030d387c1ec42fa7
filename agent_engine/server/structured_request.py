"""What output format a request asks for: OpenAI's ``response_format`` and vLLM's ``structured_outputs``.

``requested_structure(body)`` reads the three spellings clients use and returns one ``StructuredSpec``
(or None for free text):

- ``response_format``: ``{"type": "text"}`` (free), ``{"type": "json_object"}`` (any JSON object),
  ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}`` (a JSON
  value under the schema; no schema: any object) and ``{"type": "structural_tag", "format": {...}}``.
- vLLM's ``structured_outputs``: exactly one of ``json`` (a schema, dict or text), ``regex``, ``choice``
  (a list of strings), ``grammar`` (EBNF), ``json_object`` (true), ``structural_tag`` (JSON text).
- vLLM's older ``guided_json`` / ``guided_regex`` / ``guided_choice`` / ``guided_grammar`` fields.

Invariants: at most one of these may be set, else ``ValueError`` (a 400); a malformed value is a
``ValueError`` naming it; whether a schema, regex or grammar compiles is the engine's check (also a 400).

``unenforced_parts`` says what of a request's JSON schemas (the output format's, the tools') the
grammar library does not enforce (``engine.schema_support``): with ``strict`` (``response_format``'s
``json_schema.strict``, a tool's ``function.strict``) that is an ``UnenforcedSchemaError`` (a 400
naming the keyword and where), otherwise one line each for the ``IGNORED_HEADER`` response header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from agent_engine.engine.schema_support import Unenforced, unenforced
from agent_engine.json_types import JsonObject, JsonValue
from scheduler import StructuredSpec

__all__ = ["IGNORED_HEADER", "JsonSchemaFormat", "ResponseFormat", "StructuredOutputs", "UnenforcedSchemaError",
           "ignored_header", "requested_structure", "unenforced_parts"]

IGNORED_HEADER = "X-Structured-Output-Ignored"
MAX_HEADER_CHARS = 2000


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: the schema and its name (``strict`` is always honoured)."""

    model_config = ConfigDict(extra="ignore")
    name: StrictStr = "response"
    description: StrictStr | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")  # ``schema`` is BaseModel's
    strict: StrictBool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["text", "json_object", "json_schema", "structural_tag"]
    json_schema: JsonSchemaFormat | None = None
    format: dict[str, Any] | None = None

    def spec(self) -> StructuredSpec | None:
        if self.type == "text":
            return None
        if self.type == "json_object":
            return StructuredSpec.json()
        if self.type == "structural_tag":
            if self.format is None:
                raise ValueError('response_format "structural_tag" needs a format')
            return StructuredSpec.structural_tag({"type": "structural_tag", "format": self.format})
        if self.json_schema is None:
            raise ValueError('response_format "json_schema" needs a json_schema object')
        return StructuredSpec.json(self.json_schema.json_schema)


class StructuredOutputs(BaseModel):
    """vLLM's ``structured_outputs``: exactly one constraint."""

    model_config = ConfigDict(extra="forbid")
    json_: dict[str, Any] | StrictStr | None = Field(default=None, alias="json")  # ``json`` is BaseModel's
    regex: StrictStr | None = None
    choice: list[StrictStr] | None = None
    grammar: StrictStr | None = None
    json_object: StrictBool | None = None
    structural_tag: StrictStr | None = None
    disable_any_whitespace: StrictBool | None = None  # our JSON has no free whitespace either way

    def spec(self) -> StructuredSpec:
        given = {name: value for name, value in (("json", self.json_), ("regex", self.regex),
                                                  ("choice", self.choice), ("grammar", self.grammar),
                                                  ("structural_tag", self.structural_tag))
                 if value is not None}
        if self.json_object:
            given["json_object"] = True
        if len(given) != 1:
            raise ValueError("structured_outputs needs exactly one of json, regex, choice, grammar, "
                             f"json_object, structural_tag (got {', '.join(given) or 'none'})")
        (kind, value), = given.items()
        if kind == "json_object":
            return StructuredSpec.json()
        if kind == "json":
            return StructuredSpec.json(value)
        return getattr(StructuredSpec, kind)(value)


_GUIDED = {"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice",
           "guided_grammar": "grammar"}


def requested_structure(response_format: ResponseFormat | None, structured_outputs: StructuredOutputs | None,
                        guided: JsonObject) -> StructuredSpec | None:
    """The one output constraint a request asks for (None: free text). Raises ValueError."""
    legacy = {k: v for k, v in guided.items() if k in _GUIDED and v is not None}
    asked = [name for name, given in (("response_format", response_format is not None and
                                       response_format.type != "text"),
                                      ("structured_outputs", structured_outputs is not None))
             if given] + sorted(legacy)
    if len(asked) > 1:
        raise ValueError(f"only one output format may be given, got {', '.join(asked)}")
    if response_format is not None:
        return response_format.spec()
    if structured_outputs is not None:
        return structured_outputs.spec()
    if legacy:
        (name, value), = legacy.items()
        return StructuredOutputs(**{_GUIDED[name]: value}).spec()
    return None


class UnenforcedSchemaError(ValueError):
    """A ``strict`` schema uses a keyword the grammar library would not enforce; ``param`` is where."""

    def __init__(self, param: str, part: Unenforced) -> None:
        super().__init__(f"{param} uses {part.describe()}: the output could break it, and strict: true asks "
                         "for every keyword to hold; remove it, or drop strict to have it ignored")
        self.param = param


def unenforced_parts(spec: StructuredSpec | None, strict: bool,
                     tools: Sequence[Mapping[str, JsonValue]] | None = None) -> list[str]:
    """What the decoder will not enforce of the output format ``spec`` (a JSON schema) and of the
    ``tools``' parameters, one ``where: keyword at path (why)`` line each. Raises
    ``UnenforcedSchemaError`` for the first part of a strict schema (``strict`` for ``spec``, each tool's
    ``function.strict``)."""
    lines: list[str] = []
    if spec is not None and spec.kind == "json":
        found = unenforced(spec.schema)
        if found and strict:
            raise UnenforcedSchemaError("response_format", found[0])
        lines += [f"output: {part.describe()}" for part in found]
    for tool in tools or ():
        fn = tool.get("function")
        params = fn.get("parameters") if isinstance(fn, Mapping) else None
        if not isinstance(params, Mapping):
            continue
        found = unenforced(params)
        name = f"tool {fn.get('name')!s}"
        if found and fn.get("strict") is True:
            raise UnenforcedSchemaError(f"{name} (parameters)", found[0])
        lines += [f"{name}: {part.describe()}" for part in found]
    return lines


def ignored_header(lines: Sequence[str]) -> dict[str, str]:
    """The response header naming what was not enforced (none when nothing was): ASCII, one line,
    at most ``MAX_HEADER_CHARS``."""
    if not lines:
        return {}
    text = "; ".join(lines).encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else " " for c in text)
    return {IGNORED_HEADER: text[:MAX_HEADER_CHARS]}
