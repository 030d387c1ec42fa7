"""Edge validation shared by the APIs: strict scalar types, finite numbers, valid Unicode.

``StrictBool``/``StrictInt`` refuse ``"yes"`` for a boolean and ``"5"`` or ``5.0`` for an integer;
``FiniteFloat`` refuses NaN and infinities (JSON's ``NaN`` / ``Infinity`` literals, which Python's
parser accepts). ``reject_lone_surrogates`` is a pydantic ``mode="before"`` model validator: a string
anywhere in the body that is not valid Unicode (a lone UTF-16 surrogate such as ``"\\ud800"``) is a
validation error naming its place, instead of a failure deep in tokenization. Every limit of the
request edge (these, the body size, job ids, ``top_k`` against the vocabulary) is listed in
docs/limits.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt

__all__ = ["FiniteFloat", "StrictBool", "StrictInt", "find_lone_surrogate", "reject_lone_surrogates"]

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def find_lone_surrogate(value: Any, path: str = "body") -> str | None:
    """The path of the first string in ``value`` (nested dicts and lists) that is not valid Unicode."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
            stack.extend((k, f"{where} key") for k in item if isinstance(k, str))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def reject_lone_surrogates(data: Any) -> Any:
    """``mode="before"`` validator: the data unchanged, or ValueError naming the bad string's place."""
    where = find_lone_surrogate(data)
    if where is not None:
        raise ValueError(f"{where} is not valid Unicode (a lone surrogate); send UTF-8 text")
    return data
