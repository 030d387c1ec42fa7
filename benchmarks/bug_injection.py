"""Bugs injected into a library's source as SWE-smith makes them: the held-out tasks of ``bench injected``.

SWE-smith's procedural modifiers, written again here over exact source positions: an operator changed
within its group, a comparison flipped or its boundary moved, two operands swapped, an integer
constant off by one, an ``if``'s two branches swapped, a function's statements shuffled, a
conditional, an assignment or a loop removed, a parameter's default changed. Each kind lists every
place in a function it could edit; the caller draws one.

Invariants:
- Pure: reads only the text it is given; every injected text parses and differs from the original.
- An edit splices the file at the syntax tree's positions (``source_splice``); the rest stays byte
  for byte, so the known fix is the inverse splice.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent_engine.agent.source_splice import SIMPLE_EXPRESSIONS, ParsedSource, Position
from agent_engine.agent.statement_order import SCOPES, own_scope

__all__ = ["KINDS", "Injection", "injections"]

GROUPS = (("+", "-"), ("*", "/", "//", "%"), ("&", "|", "^"), ("<<", ">>"), ("**", "*"))
FLIPS = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "!=", "!=": "==", "in": "not in", "not in": "in",
         "is": "is not", "is not": "is"}
BOUNDARIES = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
Splice = tuple[Position, Position, str]  # a place and its new text


@dataclass(frozen=True)
class Injection:
    """One injected bug: the kind, the function it went into (its first line, from 1) and the new file."""

    kind: str
    function: str
    line: int
    text: str


def injections(text: str, kind: str, rng: random.Random) -> list[Injection]:
    """Every bug of ``kind`` the file's functions admit, shuffled by ``rng`` (one edit each)."""
    src = ParsedSource.parsed(text)
    if src is None:
        return []
    found: list[Injection] = []
    for function in _functions(src.tree):
        for start, end, new in KINDS[kind](src, function, rng):
            changed = src.spliced(start, end, new)
            if changed != text and ParsedSource.parsed(changed) is not None:
                found.append(Injection(kind, function.name, function.lineno, changed))
    rng.shuffle(found)
    return found


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and len(n.body) >= 2]


def _inside(function: ast.AST, kinds: type | tuple[type, ...]) -> Iterator[ast.AST]:
    """Nodes of ``kinds`` in the function's own body (not in a function nested in it)."""
    return (n for n in own_scope(function) if isinstance(n, kinds) and not isinstance(n, SCOPES))


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)


def _operator_change(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    for node in _inside(function, ast.BinOp):
        assert isinstance(node, ast.BinOp)
        span = src.operator(src.end(node.left), src.start(node.right))
        if span is None or _is_text(node.left) or _is_text(node.right):
            continue
        others = [o for group in GROUPS if span[2] in group for o in group if o != span[2]]
        if others:
            yield span[0], span[1], rng.choice(others)


def _comparisons(src: ParsedSource, function: ast.AST, table: dict[str, str]) -> Iterator[Splice]:
    for node in _inside(function, ast.Compare):
        assert isinstance(node, ast.Compare)
        span = src.operator(src.end(node.left), src.start(node.comparators[0]))
        if span is not None and span[2] in table:
            yield span[0], span[1], table[span[2]]


def _flip(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    return _comparisons(src, function, FLIPS)


def _boundary(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    return _comparisons(src, function, BOUNDARIES)


def _operand_swap(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    for node in _inside(function, ast.BinOp):
        assert isinstance(node, ast.BinOp)
        span = src.operator(src.end(node.left), src.start(node.right))
        if span is None:
            continue
        left, right = (src.source(o) if isinstance(o, SIMPLE_EXPRESSIONS) else f"({src.source(o)})"
                       for o in (node.left, node.right))
        yield src.start(node), src.end(node), f"{right} {span[2]} {left}"


def _constant(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    for node in _inside(function, (ast.BinOp, ast.Compare, ast.Subscript)):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Constant) and type(child.value) is int:
                yield src.start(child), src.end(child), str(child.value + rng.choice((-1, 1)))


def _invert_if(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    for node in _inside(function, ast.If):
        assert isinstance(node, ast.If)
        if not node.orelse or not src.segment(src.end(node.body[-1]), src.start(node.orelse[0])).rstrip().endswith(
                "else:"):
            continue  # an ``elif`` chain, or ``else`` on the same line
        body, other = _rows(src, node.body), _rows(src, node.orelse)
        if body is None or other is None:
            continue
        between = src.lines[body[1] + 1:other[0]]
        joined = [*_lines(src, other), *between, *_lines(src, body)]
        yield (body[0], 0), (other[1], len(src.lines[other[1]])), "\n".join(joined)


def _shuffle(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    if len(function.body) < 3:
        return
    order = list(range(len(function.body)))
    while order == sorted(order):
        rng.shuffle(order)
    moved = src.in_order(function.body, order)  # comments move with their statements
    if moved is not None:
        yield moved


def _removal(kinds: type | tuple[type, ...]) -> Callable[[ParsedSource, ast.AST, random.Random], Iterator[Splice]]:
    def remove(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
        for block in _blocks(function):
            for stmt in block:
                rows = src.whole_lines(stmt)
                if not isinstance(stmt, kinds) or rows is None or isinstance(stmt, ast.If) and (
                        stmt.orelse or src.lines[rows[0]].lstrip().startswith("elif")):
                    continue  # only a whole ``if`` without branches
                indent = " " * src.start(stmt)[1]
                yield (rows[0], 0), (rows[1], len(src.lines[rows[1]])), indent + "pass" if len(block) == 1 else ""
    return remove


def _default(src: ParsedSource, function: ast.AST, rng: random.Random) -> Iterator[Splice]:
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    for value in [*function.args.defaults, *(d for d in function.args.kw_defaults if d is not None)]:
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            yield src.start(value), src.end(value), str(not value.value)
        elif isinstance(value, ast.Constant) and type(value.value) is int:
            yield src.start(value), src.end(value), str(value.value + rng.choice((-1, 1)))


def _blocks(function: ast.AST) -> Iterator[list[ast.stmt]]:
    yield from ([*b] for n in [function, *_inside(function, ast.stmt)]
                for b in (getattr(n, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and b
                and isinstance(b[0], ast.stmt))


def _rows(src: ParsedSource, block: list[ast.stmt]) -> tuple[int, int] | None:
    first, last = src.whole_lines(block[0]), src.whole_lines(block[-1])
    return (first[0], last[1]) if first is not None and last is not None else None


def _lines(src: ParsedSource, rows: tuple[int, int]) -> list[str]:
    return src.lines[rows[0]:rows[1] + 1]


KINDS: dict[str, Callable[[ParsedSource, ast.AST, random.Random], Iterator[Splice]]] = {
    "op_change": _operator_change,
    "flip_comparison": _flip,
    "boundary": _boundary,
    "op_swap": _operand_swap,
    "change_const": _constant,
    "invert_if": _invert_if,
    "shuffle": _shuffle,
    "remove_cond": _removal(ast.If),
    "remove_assign": _removal((ast.Assign, ast.AugAssign)),
    "remove_loop": _removal((ast.For, ast.While)),
    "wrong_default": _default,
}
