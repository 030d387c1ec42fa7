"""What a linter sees in a suspect function (``agent_engine.agent.code_notes``): the marks a lost line leaves,
and none on finished code."""

from __future__ import annotations

import ast
import textwrap

import pytest

from agent_engine.agent.code_notes import MAX_NOTES, function_notes, module_names, scope_names

pytestmark = pytest.mark.core


def notes(source: str, name: str | None = None) -> list[str]:
    return [text for _, text in noted(source, name)]


def noted(source: str, name: str | None = None) -> list[tuple[int, str]]:
    """The notes on the function ``name`` (default: the module's first) of ``source``, found as the
    sandbox finds them: module names and enclosing functions' names visible."""
    text = textwrap.dedent(source)
    tree = ast.parse(text)
    chain: list[ast.AST] = []

    def find(node: ast.AST, holders: list[ast.AST]) -> ast.FunctionDef | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef) and (name is None or child.name == name):
                chain.extend(holders)
                return child
            if isinstance(child, ast.FunctionDef | ast.ClassDef):
                found = find(child, [*holders, child])
                if found is not None:
                    return found
        return None

    function = find(tree, [])
    assert function is not None
    visible = module_names(tree)
    for holder in chain:
        if visible is not None and isinstance(holder, ast.FunctionDef):
            visible = visible | frozenset(scope_names(holder))
    method = bool(chain) and isinstance(chain[-1], ast.ClassDef)
    return function_notes(function, text.splitlines(), visible, method)


def test_a_removed_assignment_leaves_a_name_nothing_assigns() -> None:
    found = noted("""
        import re

        def split(value):
            red = value[:length]
            return red, re.sub("x", "", value)
    """)
    assert found == [(5, "`red = value[:length]` reads `length`, which nothing assigns (not this function, its "
                         "module or the builtins)")]  # the line a missing one goes before


def test_a_local_read_before_any_assignment() -> None:
    found = notes("""
        def days(weekday, moment):
            print(weekday)
            if days_ahead < 0:
                days_ahead += 7
            return moment + days_ahead
    """)
    assert found == ["`if days_ahead < 0:` reads `days_ahead` before any line assigns it (first at "
                     "`days_ahead += 7`)"]


def test_a_value_carried_through_a_loop_is_not_read_early() -> None:
    assert notes("""
        def pairs(items):
            out = []
            for i, item in enumerate(items):
                if i:
                    out.append((prev, item))
                prev = item
            return out
    """) == []


def test_an_emptied_block_and_a_collection_nothing_fills() -> None:
    found = notes("""
        def version(partial, version):
            if not partial:
                pass
            return version
    """)
    assert found == ["the body of `if not partial:` does nothing (only `pass`)"]
    found = notes("""
        def copy_items(order):
            items = {}
            return [items[item] for item in order]
    """)
    assert found == ["`items` starts empty (`items = {}`) and no line adds to it before "
                     "`return [items[item] for item in order]` reads it"]


def test_values_assigned_and_never_read() -> None:
    found = notes("""
        def array(values, end):
            _append = values.append
            return values, end
    """)
    assert found == ["`_append = values.append` assigns `_append`, which nothing reads after"]
    found = notes("""
        def put(items, key, make):
            item = items.get(key)
            items[key] = item = make(key)
            return item
    """)
    assert found == ["`item = items.get(key)` assigns `item`, and `items[key] = item = make(key)` assigns it again "
                     "before anything reads it"]


def test_an_unused_parameter_but_not_a_methods_first_or_a_stubs() -> None:
    assert notes("""
        def resolve(doc, parts, default=None):
            return doc
    """) == ["the parameter `parts` is never used", "the parameter `default` is never used"]
    assert notes("""
        class Base:
            def hook(self, event):
                raise NotImplementedError

            def __exit__(self, kind, value, tb):
                return False
    """, "hook") == []


def test_names_from_enclosing_functions_and_the_module_are_defined() -> None:
    source = """
        try:
            import json
        except ImportError:
            json = None
        LIMIT = 3

        def make(markers):
            seen = set()

            def encode(obj):
                markerid = id(obj)
                if markerid in markers or len(seen) > LIMIT:
                    raise ValueError(json)
                seen.add(markerid)

            def other(obj):
                if markerid in markers:
                    return obj
                return None

            return encode, other
    """
    assert notes(source, "encode") == []
    # a sibling's local is not visible: ``other`` reads a name nothing in its reach assigns
    assert notes(source, "other") == ["`if markerid in markers:` reads `markerid`, which nothing assigns (not this "
                                      "function, its module or the builtins)"]


def test_comprehensions_closures_and_star_imports_say_nothing_wrong() -> None:
    assert notes("""
        def squares(xs):
            total = sum(x * x for x in xs if x)
            table = {k: v for k, v in zip(xs, xs)}
            pick = lambda key: table[key]
            return total, [pick(x) for x in xs]
    """) == []
    assert notes("""
        from somewhere import *

        def f(x):
            return helper(x)
    """) == []  # the module's names cannot all be known


def test_finished_functions_get_no_notes() -> None:
    assert notes("""
        import collections

        def count(words, limit=None):
            seen = collections.Counter()
            for word in words:
                if limit is not None and len(seen) >= limit:
                    break
                seen[word] += 1
            try:
                first = words[0]
            except IndexError:
                first = None
            with open("/dev/null") as sink:
                sink.write(str(first))
            return seen
    """) == []


def test_notes_are_capped() -> None:
    many = notes("""
        def f(a, b, c, d, e):
            return g + h + i + j + k
    """)
    assert len(many) == MAX_NOTES and all("nothing assigns" in note for note in many)  # undefined names first
