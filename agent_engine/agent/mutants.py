"""Mutants of a suspect: the one-token and one-statement edits that repair tries before any model call.

Program repair without a model (generate and validate, as PraPR and TBar do it, with the operator
sets of mutation testing: mutmut, PIT) tries the classic small edits at the suspect's code and lets
the check judge: a loosened, negated or flipped comparison, an operator changed within its group
(``+ -``, ``* / // % **``, ``& | ^``, ``<< >>``), an off-by-one constant, index, slice or ``range``
bound, a slice's step reversed, ``and``/``or``, a negated condition, ``if``/``while``, a wider
``except``, truncation for rounding, a call to the sibling method the function calls elsewhere, a
variable swapped for another on the same line, two operands, arguments, statements or chained calls
in the wrong order, a statement deleted, a statement the function (or a neighbour in its file)
already holds copied to another place, and the data-flow operators (``dataflow_mutants``: a value
computed and never used assigned to its namesake or put back into the result, the body put back in
data order, a local's lost first value, a lost assignment borrowed from the function or a neighbour,
a constructor's unread parameter kept on the instance). Each costs one run of the check and no
tokens; a wrong one is undone. Real bugs are often one such edit away from their fix; the ones that are not are left to
the model.

Invariants:
- Pure: reads only the strings it is given; ``mutants`` never raises (text that does not parse gives
  none). Type annotations are never edited (under ``from __future__ import annotations`` they run
  nothing).
- Each mutant is the whole suspect text with one edit, parses, differs from the text and from every
  other mutant; the list is in the order to try: by tier (``Mutant.tier``: 1 one token, the operands
  of a non-commutative operator or of a ``%`` whose format is on the right, a slice's step reversed,
  the data-flow operators; 2 a variable swapped, two variables trading places on a line, two
  arguments, statements or chained calls swapped, the operands of ``+`` or ``and``/``or``, a
  statement deleted; 3 a statement copied), then in source order.
- An edit splices the text at the syntax tree's positions (``agent_engine.agent.source_splice``):
  everything else stays byte for byte (never ``ast.unparse``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from agent_engine.agent.dataflow_mutants import BUILTIN_NAMES, dataflow_edits, reads_known
from agent_engine.agent.rewrite_answers import Suspect
from agent_engine.agent.source_splice import SIMPLE_EXPRESSIONS, Edit, ParsedSource, Position

__all__ = ["Mutant", "mutants", "planned"]

COMPARISONS = {"<": ("<=", ">", ">="), "<=": ("<", ">=", ">"), ">": (">=", "<", "<="), ">=": (">", "<=", "<"),
               "==": ("!=",), "!=": ("==",), "is": ("is not",), "is not": ("is",), "in": ("not in",),
               "not in": ("in",)}
_OPERATOR_GROUPS = {"+": ("-",), "-": ("+",), "*": ("/", "//", "%", "**"), "/": ("//", "*", "%"),
                    "//": ("/", "*", "%"), "%": ("//", "/", "*"), "**": ("*",), "&": ("|", "^"), "|": ("&", "^"),
                    "^": ("&", "|"), "<<": (">>",), ">>": ("<<",)}
ARITHMETIC = _OPERATOR_GROUPS | {f"{op}=": tuple(f"{o}=" for o in others) for op, others in _OPERATOR_GROUPS.items()}
BOOLEANS = {"and": "or", "or": "and"}
EXCEPTION_SIBLINGS = {"KeyError": ("IndexError", "TypeError", "AttributeError"), "IndexError": ("KeyError", "TypeError"),
                      "ValueError": ("TypeError", "OverflowError"), "TypeError": ("ValueError", "AttributeError"),
                      "AttributeError": ("TypeError", "KeyError"), "LookupError": ("TypeError",),
                      "StopIteration": ("IndexError",), "ZeroDivisionError": ("ValueError",)}
FUNCTION_PAIRS = {"min": "max", "max": "min", "any": "all", "all": "any", "floor": "ceil", "ceil": "floor"}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
MAX_COPIED_LINES = 4  # a statement copied elsewhere is at most this long

@dataclass(frozen=True)
class Mutant:
    """The suspect's text with one edit; ``what`` says which (``line 3: `<=` -> `<```), counting the
    suspect's lines from 1."""

    text: str
    tier: int
    what: str


def mutants(text: str, neighbours: tuple[str, ...] = (), lost: tuple[str, ...] = ()) -> list[Mutant]:
    """The suspect's mutants in the order to try (see the module docstring); ``neighbours``: other
    functions of its file, whose statements may be copied into it; ``lost``: names whose assignment it
    may have lost (the sandbox's ``code_notes.lost_names``), which it may borrow."""
    src = ParsedSource.parsed(text)
    if src is None:
        return []
    seen = {text}
    found: list[Mutant] = []
    annotations = _annotation_spans(src)
    edits = sorted((e for e in _edits(src, neighbours, lost) if e.start[0] >= 0
                    and not any(a <= e.start < b for a, b in annotations)), key=lambda e: (e.tier, e.start))
    for edit in edits:
        new = src.spliced(edit.start, edit.end, edit.new)
        if new in seen or ParsedSource.parsed(new) is None:
            continue
        seen.add(new)
        found.append(Mutant(new, edit.tier, f"line {edit.start[0] + 1}: {edit.what}"))
    return found


def _annotation_spans(src: ParsedSource) -> list[tuple[Position, Position]]:
    """Where the text's type annotations stand (arguments', returns', annotated assignments')."""
    found: list[ast.expr] = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [(src.start(a), src.end(a)) for a in found]


def planned(suspects: list[Suspect], limit: int, leading: int | None = None) -> list[tuple[Suspect, Mutant]]:
    """The suspects' mutants in the order to try, at most ``limit``: tier by tier, each tier's in the
    suspects' order (the likeliest first); the suspects after the first ``leading`` (default: all lead)
    count one tier later (their one-token edits after the leaders' second tier). A function's neighbours
    are the other suspect functions of its file."""
    each = [mutants(s.text, tuple(o.text for o in suspects if o.path == s.path and o is not s and not o.whole_file),
                    s.lost) for s in suspects]
    lead = len(suspects) if leading is None else leading
    order = sorted((m.tier + (i >= lead), i >= lead, i, j) for i, found in enumerate(each) for j, m in enumerate(found))
    return [(suspects[i], each[i][j]) for _, _, i, j in order[:limit]]


def _edits(src: ParsedSource, neighbours: tuple[str, ...], lost: tuple[str, ...]) -> Iterator[Edit]:
    parsed = tuple(n for n in map(ParsedSource.parsed, neighbours) if n is not None)
    for node in ast.walk(src.tree):
        yield from _token_edits(src, node)
        yield from _bound_edits(src, node)
        yield from _call_edits(src, node)
        yield from _operand_swaps(src, node)
    yield from _variable_edits(src)
    yield from _pair_swaps(src)
    yield from _swaps(src)
    yield from _deletions(src)
    yield from _copies(src, parsed)
    yield from dataflow_edits(src, parsed, lost)


def _token_edits(src: ParsedSource, node: ast.AST) -> Iterator[Edit]:
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
                yield Edit(span[0], span[1], BOOLEANS[span[2]], 1, f"`{span[2]}` -> `{BOOLEANS[span[2]]}`")
    elif isinstance(node, ast.BinOp) and not _is_text(node.left) and not _is_text(node.right):
        yield from _swapped_operator(src, node.left, node.right, ARITHMETIC)
        if isinstance(node.op, NON_COMMUTATIVE):
            yield from _reversed_operands(src, node, [node.left, node.right], 0, 1)
    elif isinstance(node, ast.AugAssign):
        yield from _swapped_operator(src, node.target, node.value, ARITHMETIC)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield Edit(src.start(node), src.start(node.operand), "", 1, "`not` dropped")
    elif isinstance(node, ast.Constant):
        yield from _constant_edits(src, node)
    elif isinstance(node, ast.If | ast.While):
        yield from _condition_edits(src, node)
    elif isinstance(node, ast.ExceptHandler) and node.type is not None:
        yield from _except_edits(src, node.type)


def _operand_swaps(src: ParsedSource, node: ast.AST) -> Iterator[Edit]:
    """Tier 2: the operands of a ``+`` without a number literal (text and sequences join in order; a sum
    of two numbers gives an equivalent mutant), or of ``and``/``or`` (what is checked first), in the
    other order; tier 1: a ``%`` with its format string on the right."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and not _is_number(node.left, node.right):
        yield from _reversed_operands(src, node, [node.left, node.right], 0, 2)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_text(node.right):
        yield from _reversed_operands(src, node, [node.left, node.right], 0, 1)  # the format goes on the left
    elif isinstance(node, ast.BoolOp):
        for i in range(len(node.values) - 1):
            yield from _reversed_operands(src, node, node.values, i, 2)


def _reversed_operands(src: ParsedSource, node: ast.expr, operands: list[ast.expr], i: int, tier: int) -> Iterator[Edit]:
    """``node`` (a binary or boolean operation of ``operands``) rewritten with operands ``i`` and ``i + 1``
    traded, each operand that is not a simple expression in parentheses (so the grouping stays)."""
    span = src.operator(src.end(operands[0]), src.start(operands[1]))
    if span is None:
        return
    terms = [src.source(o) if isinstance(o, SIMPLE_EXPRESSIONS) else f"({src.source(o)})" for o in operands]
    terms[i], terms[i + 1] = terms[i + 1], terms[i]
    yield Edit(src.start(node), src.end(node), f" {span[2]} ".join(terms), tier, "operands swapped")


def _swapped_operator(src: ParsedSource, left: ast.AST, right: ast.AST,
                      swaps: dict[str, tuple[str, ...]]) -> Iterator[Edit]:
    span = src.operator(src.end(left), src.start(right))
    if span is None or span[2] not in swaps:
        return
    for new in swaps[span[2]]:
        yield Edit(span[0], span[1], new, 1, f"`{span[2]}` -> `{new}`")


def _constant_edits(src: ParsedSource, node: ast.Constant) -> Iterator[Edit]:
    value = node.value
    if isinstance(value, bool):
        yield Edit(src.start(node), src.end(node), str(not value), 1, f"`{value}` -> `{not value}`")
    elif isinstance(value, int):
        for new in (value + 1, value - 1) if value > 0 else (value + 1,):
            yield Edit(src.start(node), src.end(node), str(new), 1, f"`{src.source(node)}` -> `{new}`")


def _condition_edits(src: ParsedSource, node: ast.If | ast.While) -> Iterator[Edit]:
    test = src.source(node.test)
    if not (isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        yield Edit(src.start(node.test), src.end(node.test), f"not ({test})", 1, f"`{test}` negated")
    start = src.start(node)
    keyword = (src.lines[start[0]][start[1]:].split(None, 1) or [""])[0]
    if not node.orelse and keyword in ("if", "while"):
        other = "while" if keyword == "if" else "if"
        yield Edit(start, (start[0], start[1] + len(keyword)), other, 1, f"`{keyword}` -> `{other}`")


def _except_edits(src: ParsedSource, caught: ast.expr) -> Iterator[Edit]:
    names = [e.id for e in (caught.elts if isinstance(caught, ast.Tuple) else [caught]) if isinstance(e, ast.Name)]
    text = ", ".join(src.source(e) for e in (caught.elts if isinstance(caught, ast.Tuple) else [caught]))
    for name in names:
        for sibling in EXCEPTION_SIBLINGS.get(name, ()):
            if sibling not in names:
                yield Edit(src.start(caught), src.end(caught), f"({text}, {sibling})", 1, f"`except` also {sibling}")
    if "Exception" not in names:
        yield Edit(src.start(caught), src.end(caught), "Exception", 1, "`except Exception`")


def _bound_edits(src: ParsedSource, node: ast.AST) -> Iterator[Edit]:
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
            yield Edit(src.start(bound), src.end(bound), f"{term} {sign} 1", 1, f"`{text}` -> `{term} {sign} 1`")
    if isinstance(node, ast.Slice) and node.step is not None:
        step, value = src.source(node.step), node.step
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            reversed_step = src.source(value.operand)
        else:
            reversed_step = f"-{step}" if isinstance(value, SIMPLE_EXPRESSIONS) else f"-({step})"
        yield Edit(src.start(node.step), src.end(node.step), reversed_step, 1, f"step `{step}` -> `{reversed_step}`")


def _call_edits(src: ParsedSource, node: ast.AST) -> Iterator[Edit]:
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
        yield Edit(start, end, other, 1, f"`{name}(...)` -> `{other}(...)`")
    if name == "int" and len(node.args) == 1 and not node.keywords:
        inner = src.source(node.args[0])
        for new, what in ((f"round({inner})", "round(...)"), (f"int(round({inner}))", "int(round(...))")):
            yield Edit(src.start(node), src.end(node), new, 1, f"`int(...)` -> `{what}`")


def _called_name(src: ParsedSource, call: ast.Call) -> tuple[str | None, Position]:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, src.end(func)
    if isinstance(func, ast.Attribute):
        return func.attr, src.end(func)
    return None, (0, 0)


def _sibling_calls(src: ParsedSource, call: ast.Call) -> list[str]:
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


def _variable_edits(src: ParsedSource) -> Iterator[Edit]:
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
            yield Edit(src.start(n), src.end(n), other, 2, f"`{n.id}` -> `{other}`")


def _pair_swaps(src: ParsedSource) -> Iterator[Edit]:
    """Tier 2: two variables of the function read on one line trading places everywhere on it
    (``max(hi, min(lo, x))`` -> ``max(lo, min(hi, x))``)."""
    bound = _bound_names(src.tree) - {"self", "cls"}
    by_row: dict[int, list[ast.Name]] = {}
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in bound:
            by_row.setdefault(src.start(n)[0], []).append(n)
    for row, names in sorted(by_row.items()):
        ids = sorted({n.id for n in names})
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                line = src.lines[row]
                for n in sorted(names, key=lambda n: -src.start(n)[1]):  # right to left: columns stay valid
                    if n.id in (a, b) and src.end(n)[0] == row:
                        (_, c0), (_, c1) = src.start(n), src.end(n)
                        line = line[:c0] + (b if n.id == a else a) + line[c1:]
                yield Edit((row, 0), (row, len(src.lines[row])), line, 2, f"`{a}` and `{b}` swapped")


def _bound_names(tree: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    return names | {h.name for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler) and h.name}


def _swapped_pair(src: ParsedSource, first: ast.AST, second: ast.AST, tier: int, what: str) -> Edit:
    """``first`` and ``second`` (in source order, apart) trade places; what lies between stays."""
    a, b = src.source(first), src.source(second)
    between = src.segment(src.end(first), src.start(second))
    return Edit(src.start(first), src.end(second), b + between + a, tier, what)


def _swaps(src: ParsedSource) -> Iterator[Edit]:
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
            yield Edit(src.end(inner.func.value), src.end(node), outer_call + inner_call, 2, "chained calls swapped")
    for block in src.blocks():
        for first, second in zip(block, block[1:], strict=False):
            simple = (ast.Assign, ast.AugAssign, ast.Expr)
            rows = src.whole_lines(first), src.whole_lines(second)
            if isinstance(first, simple) and isinstance(second, simple) and None not in rows:
                yield _swapped_pair(src, first, second, 2, "statements swapped")


def _deletions(src: ParsedSource) -> Iterator[Edit]:
    """Tier 2: a simple statement deleted (``pass`` in its place when it is its block's only one)."""
    for block in src.blocks():
        for stmt in block:
            if not isinstance(stmt, ast.Expr | ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Break | ast.Continue):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            rows = src.whole_lines(stmt)
            if rows is None:
                continue
            indent = src.start(stmt)[1]
            new = " " * indent + "pass" if len(block) == 1 else None
            first, last = rows
            if new is None and last + 1 < len(src.lines):
                yield Edit((first, 0), (last + 1, 0), "", 2, "statement deleted")
            else:
                yield Edit((first, 0), (last, len(src.lines[last])), new or "", 2, "statement deleted")


def _copies(src: ParsedSource, neighbours: tuple[ParsedSource, ...]) -> Iterator[Edit]:
    """Tier 3: a short statement the function or a neighbour holds (a call, or an ``if`` of assignments
    and calls), copied before another statement of the function, or after its block's last."""
    known = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)} | BUILTIN_NAMES
    candidates: list[str] = []
    for other in [src, *neighbours]:
        candidates += [c for c in _copyable(other) if reads_known(c, known)]
    for snippet in dict.fromkeys(candidates):
        yield from src.insertions(snippet, 3, f"`{snippet.strip().splitlines()[0]}` copied here")


def _copyable(src: ParsedSource) -> Iterator[str]:
    for block in src.blocks():
        for stmt in block:
            simple = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            small_if = (isinstance(stmt, ast.If) and not stmt.orelse
                        and all(isinstance(s, ast.Assign | ast.Expr) for s in stmt.body))
            rows = src.whole_lines(stmt)
            if (simple or small_if) and rows is not None and rows[1] - rows[0] < MAX_COPIED_LINES:
                indent = src.start(stmt)[1]
                yield "\n".join(line[indent:] for line in src.lines[rows[0]:rows[1] + 1])


def _is_number(*nodes: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, int | float | complex) for n in nodes)


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)
