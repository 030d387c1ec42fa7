"""A block's statements in data order (``agent_engine.agent.statement_order``): reads, writes, the order."""

from __future__ import annotations

import ast

import pytest

from agent_engine.agent.name_flow import unbound_reads
from agent_engine.agent.statement_order import dependency_order, reads_before_writes, writes

pytestmark = pytest.mark.core


def body(source: str) -> list[ast.stmt]:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return function.body


def statement(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


def test_reads_before_writes_follow_evaluation_order() -> None:
    assert reads_before_writes(statement("x = x + 1")) == {"x"}
    assert reads_before_writes(statement("total += x")) == {"total", "x"}
    assert reads_before_writes(statement("for i in items:\n    seen = i\n    print(seen)")) == {"items", "print"}
    assert reads_before_writes(statement("squares = [n * n for n in values if n > limit]")) == {"values", "limit"}
    assert reads_before_writes(statement("def helper(a=default):\n    return hidden")) == {"default"}
    assert reads_before_writes(statement("try:\n    pass\nexcept KeyError as err:\n    print(err)")) == {
        "KeyError", "print"}


def test_writes_are_the_names_the_statement_binds() -> None:
    assert writes(statement("a, (b, c) = f()")) == {"a", "b", "c"}
    assert writes(statement("import os.path as p, sys")) == {"p", "sys"}
    assert writes(statement("with open(f) as handle:\n    data = handle.read()")) == {"handle", "data"}
    assert writes(statement("result = [n for n in values]")) == {"result"}  # ``n`` is the comprehension's


def function(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def ordered(source: str, guards_first: bool = False) -> list[int]:
    """The data order of a function's body, by the names its current order reads before setting."""
    node = function(source)
    return dependency_order(node.body, set(unbound_reads(node)), guards_first)


def test_each_statement_moves_after_what_it_needs_and_returns_go_last() -> None:
    assert ordered("def f(xs, start):\n    return acc\n    for x in xs:\n        acc += x\n    acc = start\n") == [
        2, 1, 0]


def test_a_docstring_goes_first_and_an_order_the_data_allows_stays() -> None:
    assert ordered('def f(a):\n    b = a\n    """Doc."""\n    c = 2\n    return b + c\n') == [1, 0, 2, 3]
    assert ordered("def f(a):\n    log(a)\n    note(a)\n    return a\n") == [0, 1, 2]
    carried = "def f(a, n, x):\n    i = 0\n    while i < n:\n        x = a[i]\n        i += 1\n    x = x.strip()\n" \
              "    y = len(x)\n    x = x.lower()\n    return x, y\n"
    assert ordered(carried) == list(range(6))  # a loop's carried value, a rebound parameter: kept


def test_a_cycle_keeps_the_first_statement_left() -> None:
    assert ordered("def f():\n    x += y\n    y += x\n") == [0, 1]  # each needs the other


def test_unbound_reads_are_locals_read_before_any_assignment() -> None:
    function = ast.parse("def f(xs, n):\n    for x in xs:\n        total += x\n        seen.append(x)\n"
                         "    seen = []\n    global g\n    g += 1\n    return total + n\n").body[0]
    assert isinstance(function, ast.FunctionDef)
    assert unbound_reads(function) == ["total", "seen"]  # ``g`` is global, ``n`` a parameter
    fine = ast.parse("def f(c):\n    if c:\n        x = 1\n    else:\n        x = 2\n    return x\n").body[0]
    assert isinstance(fine, ast.FunctionDef) and unbound_reads(fine) == []


def test_guard_clauses_can_go_first() -> None:
    shuffled = ("def f(n, func):\n    if all(checks):\n        return True\n    sigs = table[func]\n"
                "    if func not in table:\n        return None\n    checks = [n in s for s in sigs]\n    return False\n")
    assert ordered(shuffled) == [1, 2, 3, 0, 4]  # ``checks`` is read before it is set
    assert ordered(shuffled, guards_first=True) == [2, 1, 3, 0, 4]


def test_names_a_nested_function_declares_nonlocal_are_still_the_outer_s_locals() -> None:
    node = function("def f():\n    count += 1\n    count = 0\n    def g():\n        nonlocal count\n        count = 2\n")
    assert unbound_reads(node) == ["count"]
