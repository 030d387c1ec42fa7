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

from agent_engine.agent.name_flow import NESTED_SCOPES, name_flow

__all__ = ["SCOPES", "dependency_order", "is_docstring", "own_scope", "reads_before_writes", "writes"]

TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
SCOPES = NESTED_SCOPES


def dependency_order(block: list[ast.stmt], names: set[str], guards_first: bool = False) -> list[int]:
    """The block's statement indices in data order (see the module docstring), ordering by ``names``
    alone (the function's ``name_flow.unbound_reads``: what its current order reads before setting; a loop's
    carried value or a rebound parameter orders nothing); ``guards_first``: among the statements free
    to go next, an ``if`` that ends in a ``return`` or ``raise`` (a guard clause) goes first."""
    walks = [name_flow([s]) for s in block]
    needs, sets = [set(w.first_reads) & names for w in walks], [w.written for w in walks]
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
    return set(name_flow([node]).first_reads)


def writes(node: ast.AST) -> set[str]:
    """Names ``node`` binds in its own scope (assignments, loop and ``with`` targets, imports, defs)."""
    return name_flow([node]).written


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
