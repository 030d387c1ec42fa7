"""What a request's output must match (structured outputs): a JSON schema, a regex, a choice or a grammar.

A ``StructuredSpec`` is a frozen, hashable value (it is the grammar cache's key) validated at
construction (``ValueError`` with a clear message). It only *describes* the constraint: compiling it
and enforcing it token by token is the engine's business (``agent_engine.engine.structured_outputs``);
the scheduler never looks inside.

Kinds and ``value``:

* ``"json"``: a JSON schema, stored as canonical JSON text (compact separators, key order kept: the
  order of ``properties`` is the order the fields are generated in). ``StructuredSpec.json()`` with no
  schema is "any JSON object" (``{"type": "object"}``, OpenAI's ``json_object`` mode).
* ``"regex"``: a regular expression the whole output must match (the library's regex dialect).
* ``"choice"``: a tuple of strings; the output is exactly one of them.
* ``"grammar"``: an EBNF grammar (GBNF / xgrammar syntax, start symbol ``root``).
* ``"structural_tag"``: a structural tag (xgrammar's format: ``{"type": "structural_tag", "format":
  {...}}``, sequences, alternatives, constant strings, JSON schemas and triggered tags), stored as
  canonical JSON text. The server describes tool calls with it: the text before and after a call's
  arguments is constant and the arguments follow the tool's schema.

``any_whitespace`` (json only): allow any JSON whitespace between tokens. Off by default: the output is
one line with ``", "`` / ``": "`` separators, which keeps a model from padding with whitespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

KINDS = ("json", "regex", "choice", "grammar", "structural_tag")
ANY_OBJECT_SCHEMA = '{"type":"object"}'


def canonical_schema(schema: Mapping[str, object] | str | bool | None) -> str:
    """The canonical JSON text of a schema (dict, JSON text, ``True`` or None = any object); ValueError if bad."""
    if schema is None or schema is True:
        return ANY_OBJECT_SCHEMA
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ValueError(f"json schema is not valid JSON: {exc}") from None
        if schema is True:
            return ANY_OBJECT_SCHEMA
    if not isinstance(schema, Mapping):
        raise ValueError(f"json schema must be a JSON object, got {type(schema).__name__}")
    try:
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"json schema is not serialisable as JSON: {exc}") from None


def canonical_structural_tag(tag: Mapping[str, object] | str) -> str:
    """The canonical JSON text of a structural tag; ValueError unless it is an object of type
    "structural_tag" with a ``format`` object (the library checks the rest when compiling)."""
    if isinstance(tag, str):
        try:
            tag = json.loads(tag)
        except json.JSONDecodeError as exc:
            raise ValueError(f"structural tag is not valid JSON: {exc}") from None
    if not isinstance(tag, Mapping) or tag.get("type") != "structural_tag" or not isinstance(tag.get("format"), Mapping):
        raise ValueError('a structural tag must be an object {"type": "structural_tag", "format": {...}}')
    try:
        return json.dumps(tag, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"structural tag is not serialisable as JSON: {exc}") from None


@dataclass(frozen=True)
class StructuredSpec:
    """One request's output constraint; build it with ``json`` / ``regex`` / ``choice`` / ``grammar``."""

    kind: str
    value: str | tuple[str, ...]
    any_whitespace: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"structured output kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not isinstance(self.any_whitespace, bool):
            raise ValueError("any_whitespace must be a bool")
        if self.any_whitespace and self.kind != "json":
            raise ValueError("any_whitespace applies to json only")
        if self.kind == "json":
            object.__setattr__(self, "value", canonical_schema(self.value))  # type: ignore[arg-type]
        elif self.kind == "structural_tag":
            object.__setattr__(self, "value", canonical_structural_tag(self.value))  # type: ignore[arg-type]
        elif self.kind == "choice":
            opts = (self.value,) if isinstance(self.value, str) else self.value
            try:
                opts = tuple(opts)
            except TypeError:
                raise ValueError("choice must be a list of strings") from None
            if not opts or any(not isinstance(o, str) or not o for o in opts):
                raise ValueError("choice must be a non-empty list of non-empty strings")
            object.__setattr__(self, "value", opts)
        elif not isinstance(self.value, str) or not self.value.strip():
            raise ValueError(f"{self.kind} must be a non-empty string")

    @classmethod
    def json(cls, schema: Mapping[str, object] | str | bool | None = None, *,
             any_whitespace: bool = False) -> StructuredSpec:
        """Output is JSON matching ``schema`` (a dict or JSON text); None: any JSON object."""
        return cls("json", canonical_schema(schema), any_whitespace)

    @classmethod
    def regex(cls, pattern: str) -> StructuredSpec:
        return cls("regex", pattern)

    @classmethod
    def choice(cls, options: Iterable[str]) -> StructuredSpec:
        return cls("choice", tuple(options) if not isinstance(options, str) else (options,))

    @classmethod
    def grammar(cls, ebnf: str) -> StructuredSpec:
        return cls("grammar", ebnf)

    @classmethod
    def structural_tag(cls, tag: Mapping[str, object] | str) -> StructuredSpec:
        """Output matches a structural tag (a dict or JSON text with ``type`` "structural_tag")."""
        return cls("structural_tag", canonical_structural_tag(tag))

    @property
    def schema(self) -> dict[str, object]:
        """The JSON schema as a dict (json kind only)."""
        if self.kind != "json":
            raise ValueError(f"a {self.kind} spec has no schema")
        return json.loads(self.value)  # type: ignore[arg-type]
