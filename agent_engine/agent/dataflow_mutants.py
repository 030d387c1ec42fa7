"""Mutants from a suspect's data flow: values computed and never read, names read before they are
set, statements out of the order their data needs.

Bugs that drop or move a line leave marks in the data flow a one-line edit can answer: a value
computed and never used (its use was lost: ``end = end2``, ``return sign * product``), a local read
before any assignment (its initialization was lost: ``total = 0`` put back), a block whose statements
read what a later one sets (the lines were shuffled: ``statement_order``).

Invariants: pure, never raises; every edit is an ``Edit`` of the text ``ParsedSource`` parsed (tier 1:
each is a strong sign of the bug it answers); ``agent_engine.agent.mutants`` orders, splices and
dedups them with the others.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from agent_engine.agent.name_flow import unbound_reads
from agent_engine.agent.source_splice import SIMPLE_EXPRESSIONS, Edit, ParsedSource
from agent_engine.agent.statement_order import dependency_order, is_docstring

__all__ = ["dataflow_edits"]

INITIAL_VALUES = {"append": "[]", "extend": "[]", "insert": "[]", "add": "set()", "update": "{}", "setdefault": "{}"}


def dataflow_edits(src: ParsedSource) -> Iterator[Edit]:
    """Every data-flow mutant of the text (see the module docstring); an operator that recursed too deep
    (an expression nested hundreds deep) gives none."""
    for operator in (_unused_assignments, _unused_in_returns, _reorderings, _initializations):
        try:
            found = list(operator(src))
        except RecursionError:
            continue
        yield from found


def _unused_assignments(src: ParsedSource) -> Iterator[Edit]:
    """Tier 1: a value assigned and never read (``end2``) given to its namesake (``end = end2``) after
    each later statement."""
    names = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for name, row in _never_read(src):
        stem = name.rstrip("0123456789_")
        for other in sorted(names - {name}):
            if other.rstrip("0123456789_") == stem:
                yield from src.insertions(f"{other} = {name}", 1, f"`{other} = {name}`", row)


def _unused_in_returns(src: ParsedSource) -> Iterator[Edit]:
    """Tier 1: a value assigned and never read (``sign`` of ``rows, sign, pivots = ...``) put back into each
    later ``return`` as a factor or a term (``return sign * product``, ``return total + carry``)."""
    for name, row in _never_read(src):
        if name.startswith("_"):
            continue  # a value thrown away on purpose
        for ret in ast.walk(src.tree):
            if not isinstance(ret, ast.Return) or ret.value is None or src.start(ret)[0] <= row:
                continue
            text = src.source(ret.value)
            term = text if isinstance(ret.value, SIMPLE_EXPRESSIONS) else f"({text})"
            for new in (f"{name} * {term}", f"{term} + {name}"):
                yield Edit(src.start(ret.value), src.end(ret.value), new, 1, f"`return {text}` -> `return {new}`")


def _never_read(src: ParsedSource) -> list[tuple[str, int]]:
    """Local names stored and never read (other than ``_``, ``__``), each with the row of its first store."""
    read = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    first: dict[str, int] = {}
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in read and n.id.strip("_"):
            row = src.start(n)[0]
            first[n.id] = min(first.get(n.id, row), row)
    return sorted(first.items(), key=lambda item: item[1])


def _reorderings(src: ParsedSource) -> Iterator[Edit]:
    """Tier 1: the function's body put in data order (``statement_order``: lines shuffled out of order),
    each statement moved with the comment lines above it; a second order puts guard clauses first."""
    function = _function(src)
    if function is None:
        return
    block, names = function.body, set(unbound_reads(function))
    if getattr(block[0], "decorator_list", None):
        return  # its decorators stand above the body's first row
    for guards_first in (False, True):
        order = dependency_order(block, names, guards_first)
        moved = src.in_order(block, order) if order != sorted(order) else None
        if moved is not None:
            yield Edit(*moved, 1, "statements put in data order" + (", guards first" if guards_first else ""))


def _function(src: ParsedSource) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The suspect's function (the first one its text defines), or None for a file."""
    return next((n for n in ast.walk(src.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)


def _initializations(src: ParsedSource) -> Iterator[Edit]:
    """Tier 1: a local the function reads before any assignment (an ``UnboundLocalError``) given a first
    value at the top of its body: the empty value its uses suggest (``.append`` a list, ``x[k] = `` a
    dict, ``.add`` a set), else ``0``, ``[]``, ``""`` and ``None``."""
    function = _function(src)
    if function is None:
        return
    body = function.body[1:] if is_docstring(function.body[0]) and len(function.body) > 1 else function.body
    rows = src.whole_lines(body[0])
    if rows is None:
        return
    indent = " " * src.start(body[0])[1]
    for name in unbound_reads(function):
        for value in _initial_values(function, name):
            yield Edit((rows[0], 0), (rows[0], 0), f"{indent}{name} = {value}\n", 1, f"`{name} = {value}` first")


def _initial_values(function: ast.AST, name: str) -> list[str]:
    suggested: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            suggested += [INITIAL_VALUES[node.attr]] if node.attr in INITIAL_VALUES else []
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
              and node.value.id == name):
            suggested.append("{}")
    return list(dict.fromkeys(suggested or ["0", "[]", '""', "None"]))

