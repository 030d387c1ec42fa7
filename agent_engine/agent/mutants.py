"""Mutants of a suspect: the one-token and one-statement edits that repair tries before any model call.

Program repair without a model (generate and validate, as PraPR and TBar do it, with the operator
sets of mutation testing: mutmut, PIT) tries the classic small edits at the suspect's code and lets
the check judge: a loosened or flipped comparison, an off-by-one constant, index, slice or ``range``
bound, ``and``/``or``, a negated condition, ``if``/``while``, a wider ``except``, truncation for
rounding, a call to the sibling method the function calls elsewhere, a variable swapped for another on
the same line, two operands, arguments, statements or chained calls in the wrong order, a statement
deleted, a statement the function (or a neighbour in its file) already holds copied to another place,
a value computed and never used assigned to its namesake. Each costs one run of the check and no
tokens; a wrong one is undone. Real bugs are often one such edit away from their
fix; the ones that are not are left to the model.

Invariants:
- Pure: reads only the strings it is given; ``mutants`` never raises (text that does not parse gives
  none).
- Each mutant is the whole suspect text with one edit, parses, differs from the text and from every
  other mutant; the list is in the order to try: by tier (``Mutant.tier``: 1 one token, or a value
  computed and never read given to its namesake, an operand order; 2 a variable swapped, two
  arguments, statements or chained calls swapped, a statement deleted; 3 a statement copied), then in
  source order.
- An edit splices the text at the syntax tree's positions: everything else stays byte for byte (never
  ``ast.unparse``).
"""

from __future__ import annotations

import ast
import builtins
import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

from agent_engine.agent.rewrite_answers import Suspect

__all__ = ["Mutant", "mutants", "planned"]

COMPARISONS = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="), "==": ("!=",),
               "!=": ("==",), "is": ("is not",), "is not": ("is",), "in": ("not in",), "not in": ("in",)}
ARITHMETIC = {"+": ("-",), "-": ("+",), "*": ("/",), "/": ("//", "*"), "//": ("/",), "+=": ("-=",), "-=": ("+=",),
              "/=": ("//=",), "//=": ("/=",)}
BOOLEANS = {"and": "or", "or": "and"}
EXCEPTION_SIBLINGS = {"KeyError": ("IndexError", "TypeError", "AttributeError"), "IndexError": ("KeyError", "TypeError"),
                      "ValueError": ("TypeError", "OverflowError"), "TypeError": ("ValueError", "AttributeError"),
                      "AttributeError": ("TypeError", "KeyError"), "LookupError": ("TypeError",),
                      "StopIteration": ("IndexError",), "ZeroDivisionError": ("ValueError",)}
FUNCTION_PAIRS = {"min": "max", "max": "min", "any": "all", "all": "any", "floor": "ceil", "ceil": "floor"}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
SIMPLE_EXPRESSIONS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
MAX_COPIED_LINES = 4  # a statement copied elsewhere is at most this long
BUILTIN_NAMES = frozenset(dir(builtins))

Position = tuple[int, int]  # (row, column) in the suspect's text, both from 0, the column in characters


@dataclass(frozen=True)
class Mutant:
    """The suspect's text with one edit; ``what`` says which (``line 3: `<=` -> `<```), counting the
    suspect's lines from 1."""

    text: str
    tier: int
    what: str


@dataclass(frozen=True)
class _Edit:
    start: Position
    end: Position
    new: str
    tier: int
    what: str


class _Source:
    """The suspect's text, its syntax tree (an indented method parsed under ``if True:``) and tokens."""

    def __init__(self, text: str, tree: ast.Module, shift: int) -> None:
        self.text, self.tree, self.shift = text, tree, shift
        self.lines = text.split("\n")
        self.tokens = _tokens(text, shift)

    @classmethod
    def parsed(cls, text: str) -> _Source | None:
        indented = text[:1].isspace()
        try:
            tree = ast.parse("if True:\n" + text if indented else text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return cls(text, tree, 1 if indented else 0)

    def start(self, node: ast.AST) -> Position:
        return self._position(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> Position:
        return self._position(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def _position(self, lineno: int, byte_col: int) -> Position:
        row = lineno - 1 - self.shift
        line = self.lines[row] if 0 <= row < len(self.lines) else ""
        return row, len(line.encode()[:byte_col].decode("utf-8", "ignore"))

    def segment(self, start: Position, end: Position) -> str:
        if start[0] == end[0]:
            return self.lines[start[0]][start[1]:end[1]]
        middle = self.lines[start[0] + 1:end[0]]
        return "\n".join([self.lines[start[0]][start[1]:], *middle, self.lines[end[0]][:end[1]]])

    def source(self, node: ast.AST) -> str:
        return self.segment(self.start(node), self.end(node))

    def operator(self, after: Position, before: Position) -> tuple[Position, Position, str] | None:
        """The operator's tokens between two operands (parentheses skipped): their span and text."""
        found = [t for t in self.tokens if after <= t[0] and t[1] <= before and t[2] not in "()"]
        if not found:
            return None
        return found[0][0], found[-1][1], " ".join(t[2] for t in found)

    def spliced(self, edit: _Edit) -> str:
        (r0, c0), (r1, c1) = edit.start, edit.end
        head = "\n".join(self.lines[:r0] + [self.lines[r0][:c0]])
        tail = "\n".join([self.lines[r1][c1:]] + self.lines[r1 + 1:])
        return head + edit.new + tail


def _tokens(text: str, shift: int) -> list[tuple[Position, Position, str]]:
    """The operator and keyword tokens of ``text`` with their spans."""
    source = "if True:\n" + text if shift else text
    try:
        found = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, RecursionError):
        return []
    return [((t.start[0] - 1 - shift, t.start[1]), (t.end[0] - 1 - shift, t.end[1]), t.string)
            for t in found if t.type in (tokenize.OP, tokenize.NAME)]


def mutants(text: str, neighbours: tuple[str, ...] = ()) -> list[Mutant]:
    """The suspect's mutants in the order to try (see the module docstring); ``neighbours``: other
    functions of its file, whose statements may be copied into it."""
    src = _Source.parsed(text)
    if src is None:
        return []
    seen = {text}
    found: list[Mutant] = []
    edits = sorted((e for e in _edits(src, neighbours) if e.start[0] >= 0), key=lambda e: (e.tier, e.start))
    for edit in edits:
        new = src.spliced(edit)
        if new in seen or _Source.parsed(new) is None:
            continue
        seen.add(new)
        found.append(Mutant(new, edit.tier, f"line {edit.start[0] + 1}: {edit.what}"))
    return found


def planned(suspects: list[Suspect], limit: int) -> list[tuple[Suspect, Mutant]]:
    """The suspects' mutants in the order to try, at most ``limit``: tier by tier, each tier's in the
    suspects' order (the likeliest first); a function's neighbours are the other suspect functions of its
    file."""
    each = [mutants(s.text, tuple(o.text for o in suspects if o.path == s.path and o is not s and not o.whole_file))
            for s in suspects]
    order = sorted(((m.tier, i, j) for i, found in enumerate(each) for j, m in enumerate(found)))
    return [(suspects[i], each[i][j]) for _, i, j in order[:limit]]


def _edits(src: _Source, neighbours: tuple[str, ...]) -> Iterator[_Edit]:
    for node in ast.walk(src.tree):
        yield from _token_edits(src, node)
        yield from _bound_edits(src, node)
        yield from _call_edits(src, node)
    yield from _variable_edits(src)
    yield from _swaps(src)
    yield from _deletions(src)
    yield from _copies(src, neighbours)
    yield from _unused_assignments(src)


def _token_edits(src: _Source, node: ast.AST) -> Iterator[_Edit]:
    """Tier 1: comparisons, ``and``/``or``, ``not``, arithmetic, constants, ``if``/``while``, ``except``."""
    if isinstance(node, ast.Compare):
        left = node.left
        for right in node.comparators:
            yield from _swapped_operator(src, left, right, COMPARISONS)
            left = right
    elif isinstance(node, ast.BoolOp):
        for left, right in zip(node.values, node.values[1:], strict=False):
            span = src.operator(src.end(left), src.start(right))
            if span is not None and span[2] in BOOLEANS:
                yield _Edit(span[0], span[1], BOOLEANS[span[2]], 1, f"`{span[2]}` -> `{BOOLEANS[span[2]]}`")
    elif isinstance(node, ast.BinOp) and not _is_text(node.left) and not _is_text(node.right):
        yield from _swapped_operator(src, node.left, node.right, ARITHMETIC)
        if isinstance(node.op, NON_COMMUTATIVE):
            yield _swapped_pair(src, node.left, node.right, 1, "operands swapped")
    elif isinstance(node, ast.AugAssign):
        yield from _swapped_operator(src, node.target, node.value, ARITHMETIC)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Edit(src.start(node), src.start(node.operand), "", 1, "`not` dropped")
    elif isinstance(node, ast.Constant):
        yield from _constant_edits(src, node)
    elif isinstance(node, ast.If | ast.While):
        yield from _condition_edits(src, node)
    elif isinstance(node, ast.ExceptHandler) and node.type is not None:
        yield from _except_edits(src, node.type)


def _swapped_operator(src: _Source, left: ast.AST, right: ast.AST,
                      swaps: dict[str, tuple[str, ...]]) -> Iterator[_Edit]:
    span = src.operator(src.end(left), src.start(right))
    if span is None or span[2] not in swaps:
        return
    for new in swaps[span[2]]:
        yield _Edit(span[0], span[1], new, 1, f"`{span[2]}` -> `{new}`")


def _constant_edits(src: _Source, node: ast.Constant) -> Iterator[_Edit]:
    value = node.value
    if isinstance(value, bool):
        yield _Edit(src.start(node), src.end(node), str(not value), 1, f"`{value}` -> `{not value}`")
    elif isinstance(value, int):
        for new in (value + 1, value - 1) if value > 0 else (value + 1,):
            yield _Edit(src.start(node), src.end(node), str(new), 1, f"`{src.source(node)}` -> `{new}`")


def _condition_edits(src: _Source, node: ast.If | ast.While) -> Iterator[_Edit]:
    test = src.source(node.test)
    if not (isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        yield _Edit(src.start(node.test), src.end(node.test), f"not ({test})", 1, f"`{test}` negated")
    start = src.start(node)
    keyword = (src.lines[start[0]][start[1]:].split(None, 1) or [""])[0]
    if not node.orelse and keyword in ("if", "while"):
        other = "while" if keyword == "if" else "if"
        yield _Edit(start, (start[0], start[1] + len(keyword)), other, 1, f"`{keyword}` -> `{other}`")


def _except_edits(src: _Source, caught: ast.expr) -> Iterator[_Edit]:
    names = [e.id for e in (caught.elts if isinstance(caught, ast.Tuple) else [caught]) if isinstance(e, ast.Name)]
    text = ", ".join(src.source(e) for e in (caught.elts if isinstance(caught, ast.Tuple) else [caught]))
    for name in names:
        for sibling in EXCEPTION_SIBLINGS.get(name, ()):
            if sibling not in names:
                yield _Edit(src.start(caught), src.end(caught), f"({text}, {sibling})", 1, f"`except` also {sibling}")
    if "Exception" not in names:
        yield _Edit(src.start(caught), src.end(caught), "Exception", 1, "`except Exception`")


def _bound_edits(src: _Source, node: ast.AST) -> Iterator[_Edit]:
    """Tier 1: an index, slice bound or ``range`` argument one more or one less."""
    bounds: list[ast.expr] = []
    if isinstance(node, ast.Slice):
        bounds = [b for b in (node.lower, node.upper) if b is not None]
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice | ast.Tuple):
        bounds = [node.slice]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        bounds = list(node.args)
    for bound in bounds:
        if isinstance(bound, ast.Constant) or _is_text(bound):
            continue
        text = src.source(bound)
        term = text if isinstance(bound, SIMPLE_EXPRESSIONS) else f"({text})"
        for sign in ("+", "-"):
            yield _Edit(src.start(bound), src.end(bound), f"{term} {sign} 1", 1, f"`{text}` -> `{term} {sign} 1`")


def _call_edits(src: _Source, node: ast.AST) -> Iterator[_Edit]:
    """Tier 1: a call to another method the function calls on the same receiver with as many arguments;
    ``min``/``max``, ``any``/``all``, ``floor``/``ceil``; ``int`` truncating where rounding was meant."""
    if not isinstance(node, ast.Call):
        return
    name, end = _called_name(src, node)
    if name is None:
        return
    start = (end[0], end[1] - len(name))
    others = [n for n in _sibling_calls(src, node) if n != name]
    if name in FUNCTION_PAIRS:
        others.append(FUNCTION_PAIRS[name])
    for other in dict.fromkeys(others):
        yield _Edit(start, end, other, 1, f"`{name}(...)` -> `{other}(...)`")
    if name == "int" and len(node.args) == 1 and not node.keywords:
        inner = src.source(node.args[0])
        for new, what in ((f"round({inner})", "round(...)"), (f"int(round({inner}))", "int(round(...))")):
            yield _Edit(src.start(node), src.end(node), new, 1, f"`int(...)` -> `{what}`")


def _called_name(src: _Source, call: ast.Call) -> tuple[str | None, Position]:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, src.end(func)
    if isinstance(func, ast.Attribute):
        return func.attr, src.end(func)
    return None, (0, 0)


def _sibling_calls(src: _Source, call: ast.Call) -> list[str]:
    """Names the function calls elsewhere in the same way: methods of the same receiver, or plain
    functions (not builtins), with as many positional arguments."""
    func, found = call.func, []
    for other in ast.walk(src.tree):
        if not isinstance(other, ast.Call) or len(other.args) != len(call.args):
            continue
        if isinstance(func, ast.Attribute) and isinstance(other.func, ast.Attribute):
            if src.source(other.func.value) == src.source(func.value):
                found.append(other.func.attr)
        elif isinstance(func, ast.Name) and isinstance(other.func, ast.Name) and other.func.id not in BUILTIN_NAMES:
            if func.id not in BUILTIN_NAMES:
                found.append(other.func.id)
    return found


def _variable_edits(src: _Source) -> Iterator[_Edit]:
    """Tier 2: a variable read in place of another variable of the function named on the same line."""
    bound = _bound_names(src.tree) - {"self", "cls"}
    names = [n for n in ast.walk(src.tree) if isinstance(n, ast.Name)]
    by_row: dict[int, set[str]] = {}
    for n in names:
        by_row.setdefault(src.start(n)[0], set()).add(n.id)
    for n in names:
        if not isinstance(n.ctx, ast.Load) or n.id not in bound:
            continue
        for other in sorted(by_row[src.start(n)[0]] & bound - {n.id}):
            yield _Edit(src.start(n), src.end(n), other, 2, f"`{n.id}` -> `{other}`")


def _bound_names(tree: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    return names | {h.name for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler) and h.name}


def _blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list inside the suspect's functions (bodies, branches, handlers)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module) or (isinstance(node, ast.If) and node.lineno == 1 and not node.orelse
                                            and isinstance(node.test, ast.Constant)):
            continue  # the module, or the ``if True:`` an indented method was parsed under
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _whole_lines(src: _Source, node: ast.stmt) -> tuple[int, int] | None:
    """The rows a statement fills alone (nothing else on them but blanks and a comment), or None."""
    (r0, c0), (r1, c1) = src.start(node), src.end(node)
    if src.lines[r0][:c0].strip() or src.lines[r1][c1:].strip() and not src.lines[r1][c1:].strip().startswith("#"):
        return None
    return r0, r1


def _swapped_pair(src: _Source, first: ast.AST, second: ast.AST, tier: int, what: str) -> _Edit:
    """``first`` and ``second`` (in source order, apart) trade places; what lies between stays."""
    a, b = src.source(first), src.source(second)
    between = src.segment(src.end(first), src.start(second))
    return _Edit(src.start(first), src.end(second), b + between + a, tier, what)


def _swaps(src: _Source) -> Iterator[_Edit]:
    """Tier 2: two things in the wrong order: a call's two positional arguments, two adjacent simple
    statements, the two calls of a chain (``s.replace(a, b).replace(c, d)``)."""
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
            if not any(isinstance(a, ast.Starred) for a in node.args):
                yield _swapped_pair(src, node.args[0], node.args[1], 2, "arguments swapped")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call)
                and isinstance(node.func.value.func, ast.Attribute)):
            inner = node.func.value
            outer_call = src.segment(src.end(inner), src.end(node))  # ``.b(q)``
            inner_call = src.segment(src.end(inner.func.value), src.end(inner))  # ``.a(p)``
            yield _Edit(src.end(inner.func.value), src.end(node), outer_call + inner_call, 2, "chained calls swapped")
    for block in _blocks(src.tree):
        for first, second in zip(block, block[1:], strict=False):
            simple = (ast.Assign, ast.AugAssign, ast.Expr)
            rows = _whole_lines(src, first), _whole_lines(src, second)
            if isinstance(first, simple) and isinstance(second, simple) and None not in rows:
                yield _swapped_pair(src, first, second, 2, "statements swapped")


def _deletions(src: _Source) -> Iterator[_Edit]:
    """Tier 2: a simple statement deleted (``pass`` in its place when it is its block's only one)."""
    for block in _blocks(src.tree):
        for stmt in block:
            if not isinstance(stmt, ast.Expr | ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Break | ast.Continue):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            rows = _whole_lines(src, stmt)
            if rows is None:
                continue
            indent = src.start(stmt)[1]
            new = " " * indent + "pass" if len(block) == 1 else None
            first, last = rows
            if new is None and last + 1 < len(src.lines):
                yield _Edit((first, 0), (last + 1, 0), "", 2, "statement deleted")
            else:
                yield _Edit((first, 0), (last, len(src.lines[last])), new or "", 2, "statement deleted")


def _copies(src: _Source, neighbours: tuple[str, ...]) -> Iterator[_Edit]:
    """Tier 3: a short statement the function or a neighbour holds (a call, or an ``if`` of assignments
    and calls), copied before another statement of the function, or after its block's last."""
    known = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)} | BUILTIN_NAMES
    candidates: list[str] = []
    for other in [src, *(n for n in map(_Source.parsed, neighbours) if n is not None)]:
        candidates += [c for c in _copyable(other) if _names_known(c, known)]
    for snippet in dict.fromkeys(candidates):
        yield from _insertions(src, snippet, 3, f"`{snippet.strip().splitlines()[0]}` copied here")


def _copyable(src: _Source) -> Iterator[str]:
    for block in _blocks(src.tree):
        for stmt in block:
            simple = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            small_if = (isinstance(stmt, ast.If) and not stmt.orelse
                        and all(isinstance(s, ast.Assign | ast.Expr) for s in stmt.body))
            rows = _whole_lines(src, stmt)
            if (simple or small_if) and rows is not None and rows[1] - rows[0] < MAX_COPIED_LINES:
                indent = src.start(stmt)[1]
                yield "\n".join(line[indent:] for line in src.lines[rows[0]:rows[1] + 1])


def _names_known(snippet: str, known: set[str]) -> bool:
    try:
        tree = ast.parse(snippet)
    except SyntaxError:
        return False
    return all(n.id in known for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _insertions(src: _Source, snippet: str, tier: int, what: str, after_row: int = -1) -> Iterator[_Edit]:
    """``snippet`` (unindented) inserted before each statement of each block below ``after_row``, and after
    each block's last, never next to a statement that reads the same."""
    for block in _blocks(src.tree):
        rows = [r for r in (_whole_lines(src, s) for s in block) if r is not None]
        if len(rows) != len(block):
            continue
        indent = src.start(block[0])[1]
        texts = ["\n".join(line[indent:] for line in src.lines[a:b + 1]) for a, b in rows]
        lines = snippet.split("\n")
        insert = "".join(" " * indent + line + "\n" if line else "\n" for line in lines)
        for i, (first, _) in enumerate(rows):
            if first > after_row and snippet != texts[i] and (i == 0 or snippet != texts[i - 1]):
                yield _Edit((first, 0), (first, 0), insert, tier, what)
        last = rows[-1][1]
        if last > after_row and snippet != texts[-1]:
            yield _Edit((last, len(src.lines[last])), (last, len(src.lines[last])), "\n" + insert[:-1], tier, what)


def _unused_assignments(src: _Source) -> Iterator[_Edit]:
    """Tier 1: a value assigned and never read (``end2``) given to its namesake (``end = end2``) after
    each later statement."""
    stored = [n for n in ast.walk(src.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    read = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    names = {n.id for n in stored}
    for node in stored:
        if node.id in read or node.id.strip("_") == "":
            continue
        stem = node.id.rstrip("0123456789_")
        for other in sorted(names - {node.id}):
            if other.rstrip("0123456789_") == stem:
                yield from _insertions(src, f"{other} = {node.id}", 1, f"`{other} = {node.id}`", src.start(node)[0])


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)
