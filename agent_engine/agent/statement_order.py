"""A block's statements in the order their data needs: the repair of lines put out of order.

A function whose lines were shuffled (a bug SWE-smith injects by permuting a function's body) reads a
name before the statement that sets it, returns before its loop, or carries its docstring in the
middle. The order rebuilt here keeps the statements' own order wherever the data allows and moves
what must move: a docstring first, each statement after every other statement of the block that sets
a name it reads before setting it itself (a cycle is broken at the first statement left), a
``return``, ``raise``, ``break`` or ``continue`` of the block last.

Invariants:
- Pure: reads only the statements it is given, never raises; the order is a permutation of their
  indices, stable (a statement moves only when a rule above moves it).
- A name orders statements only when it is one the caller names (a function's locals its current
  order reads before setting them) and the statement reads it before any write of its own; the
  order of correct code is kept, but for a docstring below the first statement or a ``return`` above
  others. Nested functions' and comprehensions' own scopes count as theirs, not the block's.
"""

from __future__ import annotations

import ast

__all__ = ["SCOPES", "dependency_order", "is_docstring", "own_scope", "reads_before_writes", "unbound_reads",
           "writes"]

TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def dependency_order(block: list[ast.stmt], names: set[str], guards_first: bool = False) -> list[int]:
    """The block's statement indices in data order (see the module docstring), ordering by ``names``
    alone (the function's ``unbound_reads``: what its current order reads before setting; a loop's
    carried value or a rebound parameter orders nothing); ``guards_first``: among the statements free
    to go next, an ``if`` that ends in a ``return`` or ``raise`` (a guard clause) goes first."""
    walks = [_walked(s) for s in block]
    needs, sets = [w.exposed & names for w in walks], [w.written for w in walks]
    after = [{i for i in range(len(block)) if i != j and sets[i] & needs[j]} for j in range(len(block))]
    order = [i for i, stmt in enumerate(block) if is_docstring(stmt)][:1]
    remaining = [i for i in range(len(block)) if i not in order]
    while remaining:
        moving = [i for i in remaining if not isinstance(block[i], TERMINAL)]
        ready = [i for i in moving if not after[i] & set(remaining)]
        guards = [i for i in ready if guards_first and _is_guard(block[i])]
        pick = (guards or ready or moving or remaining)[0]
        order.append(pick)
        remaining.remove(pick)
    return order


def reads_before_writes(node: ast.AST) -> set[str]:
    """Names ``node`` reads, in evaluation order, before writing them itself."""
    return _walked(node).exposed


def writes(node: ast.AST) -> set[str]:
    """Names ``node`` binds in its own scope (assignments, loop and ``with`` targets, imports, defs)."""
    return _walked(node).written


def _walked(node: ast.AST) -> _Walk:
    walk = _Walk()
    walk.visit(node)
    return walk


def unbound_reads(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Locals the function reads before any statement of its body sets them (an ``UnboundLocalError``
    on that path): names it sets somewhere, reads first, that are no parameter and not declared
    ``global`` or ``nonlocal``; in the order of their first read."""
    walk = _Walk()
    walk.visit_all(function.body)
    arguments = function.args
    params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    declared = {n for node in own_scope(function) if isinstance(node, ast.Global | ast.Nonlocal) for n in node.names}
    return [n for n in walk.first_reads if n in walk.written and n not in params | declared]


def own_scope(function: ast.AST) -> list[ast.AST]:
    """The function's nodes outside the functions, classes and lambdas nested in it."""
    found, stack = [], list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _is_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and isinstance(stmt.body[-1], ast.Return | ast.Raise)


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


class _Walk:
    """Visits a statement in evaluation order, noting each name's first use: a read or a write."""

    def __init__(self) -> None:
        self.exposed: set[str] = set()
        self.first_reads: list[str] = []  # the exposed names in the order they were first read
        self.written: set[str] = set()

    def read(self, name: str) -> None:
        if name not in self.written and name not in self.exposed:
            self.exposed.add(name)
            self.first_reads.append(name)

    def visit_all(self, nodes: list[ast.stmt]) -> None:
        """Statements run one after another."""
        self._each(list(nodes))

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self.read(node.id) if isinstance(node.ctx, ast.Load) else self.written.add(node.id)
        elif isinstance(node, SCOPES):
            self._scope(node)
        elif isinstance(node, COMPREHENSIONS):
            self._comprehension(node)
        elif isinstance(node, ast.Assign):
            self.visit(node.value)
            self._each(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr):
            self._each([node.value] if node.value is not None else [])
            self.visit(node.target)
        elif isinstance(node, ast.AugAssign):
            self._augmented(node)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.visit(node.iter)
            self._each([node.target, *node.body, *node.orelse])
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.written |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler):
            self._each([node.type] if node.type is not None else [])
            self.written |= {node.name} if node.name else set()
            self._each(node.body)
        elif not isinstance(node, ast.Global | ast.Nonlocal):
            self._each(list(ast.iter_child_nodes(node)))

    def _each(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            self.visit(node)

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda) -> None:
        """What a def, class or lambda evaluates where it stands (decorators, defaults, bases), and its name."""
        if isinstance(node, ast.ClassDef):
            self._each([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)])
        else:
            self._each([*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)])
            if not isinstance(node, ast.Lambda):
                self._each(node.decorator_list)
        if not isinstance(node, ast.Lambda):
            self.written.add(node.name)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        """The first iterable is read here; the loop variables are the comprehension's own."""
        own = set().union(*(writes(g.target) for g in node.generators))
        before = self.written
        self.visit(node.generators[0].iter)
        self.written = before | own
        for i, generator in enumerate(node.generators):
            self._each([*([generator.iter] if i else []), *generator.ifs])
        self._each([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])
        self.written = before | (self.written - own)

    def _augmented(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.read(node.target.id)
            self.visit(node.value)
            self.written.add(node.target.id)
        else:
            self._each([node.target, node.value])
