"""The pythonic tool-call family: the whole output is a Python list of calls, ``[f(a=1), g(b="x")]``
(Llama 3.2 / Llama 4 pythonic templates).

Invariants: only keyword arguments with literal values are calls (JSON's ``true``/``false``/``null``
are read as Python's ``True``/``False``/``None``); anything else (positional arguments, expressions,
values JSON cannot hold) makes the block text. Nothing is evaluated: values go through
``ast.literal_eval`` only.
"""

from __future__ import annotations

import ast
import json
import keyword
from collections.abc import Sequence
from typing import Any

from agent_engine.json_types import JsonObject
from agent_engine.server.tools.families import Call, Family, args_value
from agent_engine.server.tools.splitter import Markers

_JSON_NAMES = {"true": True, "false": False, "null": None}
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError)


class _JsonNames(ast.NodeTransformer):
    """``true`` / ``false`` / ``null`` names become constants (models mix JSON into Python)."""

    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 - ast's visitor naming
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node


class Pythonic(Family):
    name = "pythonic"
    markers = Markers(at_start=("[", "<|python_start|>"))
    call_example = "[function_name(argument_name=value, ...), ...]"
    closers = ")]"

    def parse_block(self, block: str) -> list[Call] | None:
        text = block.strip()
        if text.startswith("<|python_start|>"):
            text = text[len("<|python_start|>"):].removesuffix("<|python_end|>").strip()
        try:
            node = _JsonNames().visit(ast.parse(text, mode="eval")).body
        except _PARSE_ERRORS:
            return None
        if not isinstance(node, ast.List) or not node.elts:
            return None
        calls = [_call(e) for e in node.elts]
        return None if any(c is None for c in calls) else calls  # type: ignore[return-value]

    def forced_prefix(self, name: str | None) -> str:
        return "[" if name is None else f"[{name}("

    def format_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "[" + ", ".join(f"{n}({_kwargs(args_value(a))})" for n, a in calls) + "]"


def _call(node: ast.expr) -> Call | None:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    args: JsonObject = {}
    try:
        for kw in node.keywords:
            value = ast.literal_eval(kw.value)
            if kw.arg is not None:
                args[kw.arg] = value
            elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
                args.update(value)
            else:
                return None
        return node.func.id, json.dumps(args, ensure_ascii=False, allow_nan=False)
    except _PARSE_ERRORS:
        return None


def _kwargs(args: Any) -> str:
    """Keyword arguments of a call: identifiers as ``k=v``, other keys through ``**{...}``."""
    if not isinstance(args, dict):
        return f"arguments={args!r}"
    plain = {k: v for k, v in args.items() if k.isidentifier() and not keyword.iskeyword(k)}
    other = {k: v for k, v in args.items() if k not in plain}
    parts = [f"{k}={v!r}" for k, v in plain.items()]
    if other:
        parts.append(f"**{other!r}")
    return ", ".join(parts)
