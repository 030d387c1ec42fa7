"""The value checks both APIs' request models share, and the one bounded way to parse JSON text.

Every limit of the edge (these, the HTTP-level ones of ``server.edge_middleware``, job ids, ``top_k``
against the vocabulary) is listed in docs/limits.md.

Values: ``StrictBool``/``StrictInt`` refuse ``"yes"`` for a boolean and ``"5"`` or ``5.0`` for an
integer; ``FiniteFloat`` refuses NaN and infinities (JSON's ``NaN`` / ``Infinity`` literals, which
Python's parser accepts). ``check_json_body`` is a pydantic ``mode="before"`` model validator: a
string anywhere in the body that is not valid Unicode (a lone UTF-16 surrogate such as ``"\\ud800"``)
is a validation error naming its place, instead of a failure deep in tokenization. The same walk
refuses a body nested deeper than ``MAX_JSON_DEPTH`` (no template, schema compiler or ``json.dumps`` ever
recurses past it). ``loads_bounded`` is the one way the server parses JSON text a client sent inside a
field (a tool call's ``arguments``, an Anthropic ``metadata.user_id``): too deep or too long is a
``ValueError``, never a ``RecursionError``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt

__all__ = ["MAX_JSON_DEPTH", "FiniteFloat", "StrictBool", "StrictInt", "check_json_body", "find_bad_value",
           "loads_bounded"]

MAX_JSON_DEPTH = 64

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def find_bad_value(value: Any, path: str = "body") -> str | None:
    """What is wrong with ``value`` (nested dicts and lists), or None: the path of the first string
    that is not valid Unicode, or of the first container nested deeper than ``MAX_JSON_DEPTH``."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{where} is not valid Unicode (a lone surrogate); send UTF-8 text"
        elif isinstance(item, dict | list) and depth >= MAX_JSON_DEPTH:
            return f"{where} is nested deeper than {MAX_JSON_DEPTH} levels"
        elif isinstance(item, dict):
            stack.extend((v, _child(where, f".{k}"), depth + 1) for k, v in item.items())
            stack.extend((k, _child(where, " key"), depth) for k in item if isinstance(k, str))
        elif isinstance(item, list):
            stack.extend((v, _child(where, f"[{i}]"), depth + 1) for i, v in enumerate(item))
    return None


def _child(where: str, step: str) -> str:
    """A child's path for messages: whole while short, then the first 100 characters and ``...``."""
    if len(where) >= 100:
        return where if where.endswith("...") else where + "..."
    return where + step


def check_json_body(data: Any) -> Any:
    """``mode="before"`` validator: the data unchanged, or ValueError naming the bad value's place."""
    problem = find_bad_value(data)
    if problem is not None:
        raise ValueError(problem)
    return data


def loads_bounded(text: str, max_chars: int | None = None) -> Any:
    """``json.loads(text)``, refusing (ValueError) text longer than ``max_chars`` and values nested
    deeper than ``MAX_JSON_DEPTH``."""
    if max_chars is not None and len(text) > max_chars:
        raise ValueError(f"JSON text longer than {max_chars} characters")
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc
    problem = find_bad_value(value, "value")
    if problem is not None:
        raise ValueError(problem)
    return value
