"""Mutants from a suspect's data flow: values computed and never read, names read before they are
set, statements out of the order their data needs.

Bugs that drop or move a line leave marks in the data flow a one-line edit can answer: a value
computed and never used (its use was lost: ``end = end2``, ``return sign * product``), a local read
before any assignment (its initialization was lost: ``total = 0`` put back), a name read that the
function never binds while its own code or a neighbour's binds it (the assignment was lost, and the
same code makes it elsewhere: ``markerid = id(o)`` borrowed, ``next = self.next`` giving
``prev = self.prev``), a constructor's parameter nothing reads (its ``self.msg = msg`` was lost), a
block whose statements read what a later one sets (the lines were shuffled:
``statement_order``).

Invariants: pure, never raises; every edit is an ``Edit`` of the text ``ParsedSource`` parsed (tier 1:
each is a strong sign of the bug it answers); ``agent_engine.agent.mutants`` orders, splices and
dedups them with the others.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator

from agent_engine.agent.name_flow import name_flow, parameters, unbound_reads
from agent_engine.agent.source_splice import SIMPLE_EXPRESSIONS, Edit, ParsedSource
from agent_engine.agent.statement_order import dependency_order, is_docstring

__all__ = ["BUILTIN_NAMES", "dataflow_edits", "reads_known"]

BUILTIN_NAMES = frozenset(dir(builtins))
INITIAL_VALUES = {"append": "[]", "extend": "[]", "insert": "[]", "add": "set()", "update": "{}", "setdefault": "{}"}


def dataflow_edits(src: ParsedSource, neighbours: tuple[ParsedSource, ...] = (),
                   lost: tuple[str, ...] = ()) -> Iterator[Edit]:
    """Every data-flow mutant of the text (see the module docstring); ``neighbours``: the other functions of
    its file whose assignments it may borrow; ``lost``: the names whose assignment it may have lost (read
    and bound nowhere in its reach, or read before it binds them: the sandbox knows its module). An
    operator that recursed too deep (an expression nested hundreds deep) gives none."""
    operators = (_unused_assignments, _unused_in_returns, _reorderings, lambda s: _initializations(s, lost),
                 lambda s: _borrowed_assignments(s, neighbours, lost), _unused_parameter_stores)
    for operator in operators:
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


def _initializations(src: ParsedSource, lost: tuple[str, ...] = ()) -> Iterator[Edit]:
    """Tier 1: a local the function reads before any assignment (an ``UnboundLocalError``), or a ``lost``
    name it never binds, given a first value at the top of its body: the empty value its uses suggest
    (``.append`` a list, ``x[k] = `` a dict, ``.add`` a set), else ``0``, ``[]``, ``""`` and ``None``."""
    function = _function(src)
    if function is None:
        return
    body = function.body[1:] if is_docstring(function.body[0]) and len(function.body) > 1 else function.body
    rows = src.whole_lines(body[0])
    if rows is None:
        return
    indent = " " * src.start(body[0])[1]
    bound = name_flow(function.body).written
    for name in dict.fromkeys([*unbound_reads(function), *(n for n in lost if n not in bound)]):
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



def _borrowed_assignments(src: ParsedSource, neighbours: tuple[ParsedSource, ...],
                          lost: tuple[str, ...]) -> Iterator[Edit]:
    """Tier 1: for each ``lost`` name, an assignment binding it that the function or a neighbour holds,
    copied before the statement of its first read (a neighbour's positional parameters read as the
    function's at the same place: ``markerid = id(o)`` in ``_iterencode(o, ...)`` gives ``markerid =
    id(obj)`` in ``_iterencode_method(obj, ...)``), and an assignment of the function's from an attribute
    of its own name renamed (``next = self.next`` gives ``prev = self.prev``). Only one-line snippets
    whose every read name the function already reads or binds (or, borrowed from a neighbour, that the
    neighbour reads from outside itself: its module's names, which the function sees too)."""
    function = _function(src)
    if function is None or not lost:
        return
    flow, ours = name_flow(function.body), _positional(function)
    known = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | parameters(function) | BUILTIN_NAMES
    for name in lost:
        reads = flow.loads.get(name)
        before = _statement_at(src, src.start(reads[0].node)[0]) if reads else None
        if before is None:
            continue
        candidates = [c for c in [*_assignments_of(name, src, function, ours),
                                  *_renamed_assignments(name, src, function)] if reads_known(c, known)]
        for other in neighbours:
            holder = _function(other)
            if holder is not None:  # what the neighbour reads from outside itself, the module's, is ours too
                theirs = known | _free_names(holder)
                candidates += [c for c in _assignments_of(name, other, holder, ours) if reads_known(c, theirs)]
        row, indent = src.start(before)
        for snippet in dict.fromkeys(candidates):
            yield Edit((row, 0), (row, 0), " " * indent + snippet + "\n", 1, f"`{snippet}` borrowed")


def _free_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the function reads and never binds, no parameter: what it reads from outside itself."""
    flow = name_flow(function.body)
    return set(flow.first_reads) - flow.written - parameters(function)


def _statement_at(src: ParsedSource, row: int) -> ast.stmt | None:
    """The innermost statement of the text's blocks that holds ``row`` and fills its lines alone."""
    holding = [stmt for block in src.blocks() for stmt in block
               if (rows := src.whole_lines(stmt)) is not None and rows[0] <= row <= rows[1]]
    return max(holding, key=lambda stmt: src.start(stmt)[0], default=None)


def _positional(function: ast.AST) -> list[str]:
    args = getattr(function, "args", None)
    return [a.arg for a in [*args.posonlyargs, *args.args]] if isinstance(args, ast.arguments) else []


def _assignments_of(name: str, src: ParsedSource, holder: ast.AST, ours: list[str]) -> list[str]:
    """The one-line assignments in ``holder`` (of ``src``) whose targets bind ``name``, as text, and each
    with the holder's positional parameters read as ``ours`` at the same place (when they differ)."""
    theirs = _positional(holder)
    renames = {t: o for t, o in zip(theirs, ours, strict=False) if t != o}
    found = []
    for node in ast.walk(holder):
        if (isinstance(node, ast.Assign) and src.start(node)[0] == src.end(node)[0]
                and any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                        for t in node.targets for n in ast.walk(t))):
            text = src.source(node)
            found.append(text)
            if renames:
                pattern = r"\b(" + "|".join(map(re.escape, renames)) + r")\b"
                found.append(re.sub(pattern, lambda m: renames[m.group(1)], text))
    return found


def _renamed_assignments(name: str, src: ParsedSource, function: ast.AST) -> list[str]:
    """``other = expr`` of the function where ``other`` and ``name`` differ in one word part (``next`` /
    ``prev``, ``append_false`` / ``append_true``) and ``expr`` holds that part too, with the part swapped
    in every identifier of the statement (``next = self.next`` gives ``prev = self.prev``,
    ``append_false = false_queue.append`` gives ``append_true = true_queue.append``)."""
    found = []
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and src.start(node)[0] == src.end(node)[0]):
            continue
        swap = _one_part_swap(node.targets[0].id, name)
        if swap is None:
            continue
        value = src.source(node.value)
        renamed = _swapped_parts(value, *swap)
        if renamed != value:
            found.append(f"{name} = {renamed}")
    return found


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _swapped_parts(text: str, old: str, new: str) -> str:
    """``text`` with the word part ``old`` of every identifier (split at ``_``) read as ``new``."""
    return _IDENTIFIER.sub(lambda m: "_".join(new if part == old else part for part in m.group(0).split("_")), text)


def _one_part_swap(other: str, name: str) -> tuple[str, str] | None:
    """``(part of other, part of name)`` when the two names split at ``_`` into as many parts and differ
    in exactly one (``append_false``, ``append_true``: ``("false", "true")``); else None."""
    mine, theirs = other.split("_"), name.split("_")
    differ = [(a, b) for a, b in zip(mine, theirs, strict=False) if a != b]
    if len(mine) != len(theirs) or len(differ) != 1 or not all(differ[0]):
        return None
    return differ[0]


def _unused_parameter_stores(src: ParsedSource) -> Iterator[Edit]:
    """Tier 1: a constructor's parameter nothing reads, kept on the instance (``self.msg = msg``) before
    each statement of its body and after the last: the argument it forgot to store."""
    function = _function(src)
    if function is None or function.name != "__init__":
        return
    positional = _positional(function)
    if not positional or positional[0] != "self":
        return
    flow = name_flow(function.body)
    read = flow.read
    named = [a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]][1:]
    stored = {n.attr for n in ast.walk(function) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    body = function.body[1:] if is_docstring(function.body[0]) and len(function.body) > 1 else function.body
    rows = [r for r in (src.whole_lines(stmt) for stmt in body) if r is not None]
    if len(rows) != len(body):
        return
    indent = " " * src.start(body[0])[1]
    for param in (p for p in named if p not in read and p not in stored and not p.startswith("_")):
        line = f"{indent}self.{param} = {param}\n"
        for first, _ in rows:
            yield Edit((first, 0), (first, 0), line, 1, f"`self.{param} = {param}` kept")
        last = rows[-1][1]
        yield Edit((last, len(src.lines[last])), (last, len(src.lines[last])), "\n" + line[:-1], 1,
                   f"`self.{param} = {param}` kept")


def reads_known(snippet: str, known: set[str]) -> bool:
    """Whether ``snippet`` parses and every name it reads is in ``known``."""
    try:
        tree = ast.parse(snippet)
    except SyntaxError:
        return False
    return all(n.id in known for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
