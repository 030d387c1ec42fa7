"""What a linter sees in a suspect function: the marks a lost line leaves in the code around it.

A bug that took a line out (an assignment, a guard, a loop) leaves no wrong token for a mutant to
flip; what it leaves is data flow that no finished function has: a name read that nothing defines, a
local read before any line assigns it, a value assigned and never read (or assigned again first), a
collection that starts empty and that nothing fills, a branch that is only ``pass``, a parameter never
used. ``function_notes`` lists those, each quoting its line, for the rewrite prompt: they point a
small model at code to write back ("``length`` is read and nothing assigns it") rather than a token
to change.

Part of the tool program (``agent_engine.agent.aci.tool_program`` runs this source before
``repair_tool``'s, in one namespace); ``repair_tool.suspects`` adds the notes to each function suspect.
Standard library only; importing it runs nothing.

Invariants: pure (reads only the syntax trees given), never raises (a tree it cannot walk gives no
notes); at most ``MAX_NOTES`` notes, the likeliest marks of a lost line first; each names its line by
the line's text (the prompt may show the function without line numbers) and carries that line's number
in the file (the rewrite stage asks about it alone); a module whose names cannot
all be known (``import *``, ``globals()``) gets no note about undefined names.
"""

from __future__ import annotations

import ast
import builtins

if __name__.startswith("agent_engine."):  # on the host; in the sandbox name_flow's source ran here
    from agent_engine.agent.name_flow import NameFlow, name_flow, parameters, pattern_names, unbound_reads

MAX_NOTES = 4
QUOTE_CHARS = 80  # of a line quoted in a note
Note = tuple[int, str]  # the file line a note points at (where a line may be missing there), and its text
_BUILTIN_NAMES = frozenset(dir(builtins)) | {
    "__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__", "__path__",
    "__annotations__", "__dict__", "__module__", "__qualname__", "__class__", "__debug__"}
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_EMPTY_CALLS = frozenset({"list", "dict", "set", "OrderedDict", "defaultdict", "deque"})
_READ_ONLY_CALLS = frozenset({  # builtins that read an argument without changing it
    "len", "bool", "list", "tuple", "sorted", "set", "frozenset", "dict", "iter", "enumerate", "zip", "reversed",
    "sum", "min", "max", "any", "all", "repr", "str", "print", "isinstance", "hash", "id", "type"})


def module_names(module: ast.Module) -> frozenset[str] | None:
    """Every name the module binds at its top level (in any ``if``/``try`` there, not inside functions or
    classes), or None when that cannot be known (``from m import *``, ``globals()``)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars"):
            return None
        if isinstance(node, _FUNCTIONS + (ast.ClassDef,)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        names.update(pattern_names(node))
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def scope_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names ``function``'s own scope binds (its parameters, its body's assignments, imports and
    definitions; not its nested functions' locals): what a function nested in it may read."""
    try:
        flow = name_flow(function.body)
    except RecursionError:
        return set()
    return set(flow.stores) | parameters(function)


def function_notes(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str],
                   visible: frozenset[str] | None, method: bool = False) -> list[Note]:
    """The notes on ``function`` (see the module docstring). ``lines``: its module's lines (to quote);
    ``visible``: the names it may read from outside (its module's and enclosing functions' bindings;
    None: unknown, so no note on undefined names); ``method``: defined directly in a class (its first
    parameter is the instance or class)."""
    try:
        flow = name_flow(function.body)
        notes = [*_undefined(flow, function, lines, visible), *_read_early(flow, function, lines),
                 *_placeholders(function, lines), *_never_filled(flow, function, lines),
                 *_dead_stores(flow, function, lines), *_unused_params(flow, function, method)]
    except (RecursionError, ValueError, AttributeError, TypeError):
        return []
    unique: list[Note] = []
    for line, text in notes:
        if all(text != kept for _, kept in unique):
            unique.append((line, text))
    return unique[:MAX_NOTES]


def _quote(lines: list[str], line: int) -> str:
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return "`" + (text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "...") + "`"


def undefined_names(flow: NameFlow, function: ast.AST, visible: frozenset[str] | None) -> list[str]:
    """Names the function reads that nothing in its reach binds (not it, ``visible``, the builtins), in
    the order of their first read; [] when ``visible`` is None (unknown)."""
    if visible is None:
        return []
    bound = set(flow.stores) | flow.nested_stores | parameters(function) | visible | _BUILTIN_NAMES
    return [name for name in flow.first_reads if name not in bound and name not in flow.declared]


def early_reads(flow: NameFlow, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """``unbound_reads``: locals first read before any line of the function assigns them, but for a read
    and a first assignment inside one loop (a value carried to the next iteration)."""
    return [name for name in unbound_reads(function, flow)
            if not _in_one_loop(function, flow.loads[name][0].line, flow.stores[name][0].line)]


def lost_names(function: ast.FunctionDef | ast.AsyncFunctionDef, visible: frozenset[str] | None) -> list[str]:
    """The names whose assignment the function may have lost: read and bound nowhere in its reach, or
    read before any line of it binds them; [] when its tree cannot be walked."""
    try:
        flow = name_flow(function.body)
        return [*undefined_names(flow, function, visible), *early_reads(flow, function)]
    except (RecursionError, ValueError, AttributeError, TypeError):
        return []


def _undefined(flow: NameFlow, function: ast.AST, lines: list[str], visible: frozenset[str] | None) -> list[Note]:
    notes: list[Note] = []
    for name in undefined_names(flow, function, visible):
        line = flow.loads[name][0].line
        notes.append((line, f"{_quote(lines, line)} reads `{name}`, which nothing assigns (not this function, its "
                            "module or the builtins)"))
    return notes


def _read_early(flow: NameFlow, function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> list[Note]:
    notes: list[Note] = []
    for name in early_reads(flow, function):
        read, first = flow.loads[name][0].line, flow.stores[name][0].line
        notes.append((read, f"{_quote(lines, read)} reads `{name}` before any line assigns it (first at "
                            f"{_quote(lines, first)})"))
    return notes


def _in_one_loop(function: ast.AST, first: int, second: int) -> bool:
    for node in ast.walk(function):
        if isinstance(node, _LOOPS) and node.lineno <= min(first, second) and max(first, second) <= (
                node.end_lineno or node.lineno):
            return True
    return False


def _blocks(function: ast.AST) -> list[tuple[ast.AST, str, list[ast.stmt]]]:
    """The statement lists of ``function``'s own scope: (holder, field, statements)."""
    found: list[tuple[ast.AST, str, list[ast.stmt]]] = []
    stack: list[ast.AST] = [function]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt | ast.ExceptHandler):
                found.append((node, name, block))
                stack.extend(s for s in block if not isinstance(s, _FUNCTIONS + (ast.ClassDef,)))
        if isinstance(node, ast.Match):
            for case in node.cases:
                found.append((case, "body", case.body))
                stack.extend(case.body)
    return found


def _placeholders(function: ast.AST, lines: list[str]) -> list[Note]:
    """Blocks (an ``if``'s, a loop's, a ``with``'s, a ``try``'s) that are only ``pass`` or ``...``:
    an ``except`` that swallows, a function or class stub, is not one."""
    notes: list[Note] = []
    for holder, name, block in _blocks(function):
        if holder is function or isinstance(holder, ast.ExceptHandler | ast.ClassDef) or name == "handlers":
            continue
        if len(block) == 1 and _empty_statement(block[0]):
            what = _block_name(holder, name, lines)
            notes.append((block[0].lineno, f"{what} does nothing (only {_quote(lines, block[0].lineno)})"))
    return notes


def _empty_statement(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                                          and stmt.value.value is Ellipsis)


def _block_name(holder: ast.AST, name: str, lines: list[str]) -> str:
    if name == "orelse":
        return f"the `else` of {_quote(lines, holder.lineno)}"  # type: ignore[attr-defined]
    if name == "finalbody":
        return f"the `finally` of {_quote(lines, holder.lineno)}"  # type: ignore[attr-defined]
    return f"the body of {_quote(lines, holder.lineno)}"  # type: ignore[attr-defined]


def _never_filled(flow: NameFlow, function: ast.AST, lines: list[str]) -> list[Note]:
    """Locals bound once, to an empty collection, whose every read leaves them as they are."""
    notes: list[Note] = []
    parents = {child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
    for name, stores in flow.stores.items():
        loads = flow.loads.get(name, [])
        if len(stores) != 1 or not loads or name in flow.nested_loads or name in flow.declared:
            continue
        assign = parents.get(stores[0].node)
        if not isinstance(assign, ast.Assign) or not _empty_collection(assign.value):
            continue
        if all(_reads_only(use.node, parents) for use in loads):
            notes.append((loads[0].line, f"`{name}` starts empty ({_quote(lines, stores[0].line)}) and no line adds to "
                                         f"it before {_quote(lines, loads[0].line)} reads it"))
    return notes


def _empty_collection(value: ast.AST) -> bool:
    if isinstance(value, ast.List | ast.Set | ast.Tuple) and not value.elts:
        return True
    if isinstance(value, ast.Dict) and not value.keys:
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        func = value.func
        return (isinstance(func, ast.Name) and func.id in _EMPTY_CALLS) or (
            isinstance(func, ast.Attribute) and func.attr in _EMPTY_CALLS)
    return False


def _reads_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether this read of a name leaves its value as it is: not a method or attribute reached through it,
    not an item assigned or deleted, not an argument of a call that may change it, no ``del``."""
    if isinstance(getattr(node, "ctx", None), ast.Del):
        return False
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute):
        return False
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return isinstance(parent.ctx, ast.Load)
    if isinstance(parent, ast.Call) and node in parent.args:
        return isinstance(parent.func, ast.Name) and parent.func.id in _READ_ONLY_CALLS
    if isinstance(parent, ast.keyword | ast.Starred):
        return False
    return True


def _dead_stores(flow: NameFlow, function: ast.AST, lines: list[str]) -> list[Note]:
    """Simple assignments whose value nothing reads: none after them (and none in a loop holding them),
    or the same block assigns the name again first."""
    if _calls_locals(function):
        return []
    notes: list[Note] = []
    for name, stores in flow.stores.items():
        if name == "_" or name.startswith("__") or name in flow.declared or name in flow.nested_loads:
            continue
        loads = flow.loads.get(name, [])
        for store in stores:
            if not isinstance(store.node, ast.Name) or not _simple_target(store.node, function):
                continue
            later = [u for u in loads if u.tick > store.tick]
            if not later and not any(_in_one_loop(function, store.line, u.line) for u in loads):
                notes.append((store.line, f"{_quote(lines, store.line)} assigns `{name}`, which nothing reads after"))
                break
    notes.extend(_overwritten(function, lines))
    return notes


def _simple_target(target: ast.Name, function: ast.AST) -> bool:
    """Whether ``target`` is a whole target of an ``=`` (not a tuple's element, a loop's, a ``with``'s; not
    an augmented assignment, which may change the object in place)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and target in node.targets:
            return True
        if isinstance(node, ast.AnnAssign) and node.target is target:
            return True
    return False


def _overwritten(function: ast.AST, lines: list[str]) -> list[Note]:
    """``x = a`` then, later in the same block and with nothing between that reads ``x`` or leaves the
    block, ``x = b``."""
    notes: list[Note] = []
    for holder, field_name, block in _blocks(function):
        if isinstance(holder, ast.Try) and field_name == "body":
            continue  # an exception between the two may reach a handler that reads the first value
        for i, stmt in enumerate(block):
            if not isinstance(stmt, ast.Assign) or not any(isinstance(t, ast.Name) for t in stmt.targets):
                continue
            for name in (t.id for t in stmt.targets if isinstance(t, ast.Name)):
                j = _next_store(block, i, name)
                if j is not None:
                    notes.append((stmt.lineno, f"{_quote(lines, stmt.lineno)} assigns `{name}`, and "
                                  f"{_quote(lines, block[j].lineno)} assigns it again before anything reads it"))
    return notes


def _next_store(block: list[ast.stmt], i: int, name: str) -> int | None:
    for j in range(i + 1, len(block)):
        stmt = block[j]
        reads = any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Store) for n in ast.walk(stmt))
        leaves = any(isinstance(n, ast.Return | ast.Raise | ast.Break | ast.Continue | ast.Yield | ast.YieldFrom
                                | ast.Await) for n in ast.walk(stmt))
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return None if reads else j
        if reads or leaves or isinstance(stmt, _FUNCTIONS + (ast.ClassDef,)):
            return None
    return None


def _calls_locals(function: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars", "eval", "exec")
               for n in ast.walk(function))


def _unused_params(flow: NameFlow, function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[Note]:
    """Named parameters nothing reads, in a function with a body of its own (not a stub, an abstract or
    overloaded signature, a special method's fixed signature), leaving out a method's first and names
    starting with ``_``."""
    if function.name.startswith("__") or _stub(function) or _calls_locals(function) or any(
            "abstract" in ast.unparse(d) or "overload" in ast.unparse(d) for d in function.decorator_list):
        return []
    named = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    if method and named and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list):
        named = named[1:]
    read = flow.read
    unused = [a.arg for a in named if not a.arg.startswith("_") and a.arg not in read and a.arg not in ("self", "cls")]
    return [(function.lineno, f"the parameter `{name}` is never used") for name in unused]


def _stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                             and isinstance(s.value.value, str))]
    return not body or all(_empty_statement(s) or isinstance(s, ast.Raise) for s in body)
