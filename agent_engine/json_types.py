"""JSON values, as they cross the project's edges: one alias, defined once, instead of ``Any``.

``JsonValue`` is what ``json.loads`` returns (and what ``json.dumps`` takes): null, a boolean, a
number, a string, an array or an object of JSON values. ``JsonObject`` is a JSON object: a request
body, a tool's schema, an OpenAI message, a trace record, a report row. Code that reads deeper into
one checks the shape it needs first (``isinstance``, or a schema that validated it at the edge).
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"
