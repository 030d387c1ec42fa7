"""Which parts of a JSON schema the grammar library does not enforce (xgrammar 0.2.8).

``unenforced(schema)`` lists every keyword of ``schema`` and its subschemas that a constrained output
may break, each with the JSON pointer of the subschema that holds it and why. A ``strict`` request
with any is refused (400 naming the first); otherwise the server decodes under what the library does
enforce and says what it ignored (docs/structured-outputs.md).

What the library ignores, found by compiling each keyword and feeding the matcher a document that
breaks it (``tests/test_grammar_checks.py`` does so for every entry, so an upgrade that starts
enforcing one fails there):

- always: ``not``, ``if``/``then``/``else``, ``dependentRequired``, ``dependentSchemas``,
  ``dependencies``, ``contains``/``minContains``/``maxContains``, ``uniqueItems: true``,
  ``additionalItems``, ``unevaluatedProperties``, ``$dynamicRef``, ``$recursiveRef``;
- ``allOf`` with more than one schema; ``oneOf`` is decoded as ``anyOf`` (an output may match two
  branches);
- ``multipleOf`` unless the schema's type is ``integer``;
- ``format`` outside ``ENFORCED_FORMATS``;
- ``minLength``/``maxLength`` beside ``pattern`` or ``format``;
- ``patternProperties`` beside ``properties`` unless ``additionalProperties`` is false;
- a ``required`` name with no schema in ``properties``;
- a ``$ref`` that is not local (``#`` or ``#/...``: remote, ``$id``-relative or an anchor), and every
  assertion beside a ``$ref``.

Annotations (``title``, ``description``, ``default``, ``examples``, ``content*``, ...) and keywords
that do not apply to the schema's type are not assertions the output could break, so they are not
listed. Invariants: pure (no library import), iterative (no recursion limit), each subschema visited
once, at most ``MAX_REPORTED`` entries returned.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

MAX_REPORTED = 32
ENFORCED_FORMATS = frozenset({
    "email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri",
    "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"})
ALWAYS_IGNORED = {
    "not": "negation is not enforced",
    "dependentRequired": "conditional requirements are not enforced",
    "dependentSchemas": "conditional schemas are not enforced",
    "dependencies": "conditional requirements are not enforced",
    "contains": "array containment is not enforced",
    "minContains": "array containment is not enforced",
    "maxContains": "array containment is not enforced",
    "additionalItems": "use prefixItems with items: false instead",
    "unevaluatedProperties": "use additionalProperties instead",
    "$dynamicRef": "dynamic references are not resolved",
    "$recursiveRef": "recursive references are not resolved",
}
ANNOTATIONS = frozenset({
    "$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "title", "description", "default",
    "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType", "contentSchema"})
# Keywords whose value is one subschema, and those whose value maps names (or lists) to subschemas.
SUBSCHEMA = ("additionalProperties", "items", "unevaluatedItems", "not", "if", "then", "else", "contains",
             "propertyNames", "additionalItems")
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True)
class Unenforced:
    """A keyword at ``path`` (the JSON pointer of its subschema) that the library does not enforce."""

    keyword: str
    path: str
    reason: str

    def describe(self) -> str:
        return f"{self.keyword} at {self.path or '/'} ({self.reason})"


def unenforced(schema: Mapping[str, object]) -> list[Unenforced]:
    """The keywords of ``schema`` (and its subschemas) a constrained output may break, in document order."""
    found: list[Unenforced] = []
    for path, sub in _subschemas(schema):
        for keyword, reason in _ignored_here(sub):
            found.append(Unenforced(keyword, path, reason))
            if len(found) >= MAX_REPORTED:
                return found
    return found


def _ignored_here(s: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    for keyword, reason in ALWAYS_IGNORED.items():
        if keyword in s:
            yield keyword, reason
    if "if" in s and ("then" in s or "else" in s):
        yield "if", "conditional schemas (if/then/else) are not enforced"
    if s.get("uniqueItems") is True:
        yield "uniqueItems", "unique array items are not enforced"
    if isinstance(s.get("allOf"), list) and len(s["allOf"]) > 1:
        yield "allOf", "only a single-schema allOf is enforced"
    if "oneOf" in s:
        yield "oneOf", "decoded as anyOf: an output may match more than one branch; use anyOf"
    if "multipleOf" in s and s.get("type") != "integer":
        yield "multipleOf", "enforced for type integer only"
    fmt = s.get("format")
    if isinstance(fmt, str) and fmt not in ENFORCED_FORMATS:
        yield "format", f"the format {fmt!r} is not enforced (enforced: {', '.join(sorted(ENFORCED_FORMATS))})"
    if ("pattern" in s or "format" in s) and ("minLength" in s or "maxLength" in s):
        yield "minLength/maxLength", "string lengths are not enforced beside pattern or format"
    if "patternProperties" in s and "properties" in s and s.get("additionalProperties") is not False:
        yield "patternProperties", "not enforced beside properties unless additionalProperties is false"
    required, props = s.get("required"), s.get("properties")
    if isinstance(required, list):
        missing = [r for r in required if not isinstance(props, Mapping) or r not in props]
        if missing:
            yield "required", f"required names without a schema in properties are not enforced: {missing[:5]}"
    ref = s.get("$ref")
    if isinstance(ref, str):
        if ref != "#" and not ref.startswith("#/"):
            yield "$ref", f"only local references ('#' or '#/...') are resolved, not {ref[:80]!r}"
        siblings = sorted(k for k in s if k != "$ref" and k not in ANNOTATIONS)
        if siblings:
            yield "$ref", f"keywords beside a $ref are not enforced: {siblings[:5]}"


def _subschemas(schema: Mapping[str, object]) -> Iterator[tuple[str, Mapping[str, object]]]:
    """``(json pointer, subschema)`` for the schema and every subschema it holds, depth first."""
    todo: list[tuple[str, object]] = [("", schema)]
    while todo:
        path, s = todo.pop()
        if not isinstance(s, Mapping):
            continue
        yield path, s
        children: list[tuple[str, object]] = []
        for key in SUBSCHEMA:
            if key in s:
                children.append((f"{path}/{key}", s[key]))
        for key in SUBSCHEMA_MAPS:
            if isinstance(s.get(key), Mapping):
                children += [(f"{path}/{key}/{_escape(name)}", v) for name, v in s[key].items()]
        for key in SUBSCHEMA_LISTS:
            if isinstance(s.get(key), list):
                children += [(f"{path}/{key}/{i}", v) for i, v in enumerate(s[key])]
        todo += reversed(children)


def _escape(name: object) -> str:
    """A JSON pointer reference token (RFC 6901)."""
    return str(name).replace("~", "~0").replace("/", "~1")
