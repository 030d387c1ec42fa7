"""No import circles between the project's modules, counting every import.

Every ``import`` and ``from ... import`` of every module counts: at the top, inside functions and under
``if TYPE_CHECKING:`` alike (a circle hidden from the interpreter is still a circle for a reader). An
import names the deepest project module it reaches: ``from a.b import c`` is an edge to ``a.b.c`` when
that is a module, else to ``a.b`` (a package's ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.core

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent_engine", "scheduler", "estimator", "kernels", "benchmarks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every project module by dotted name (a package by its ``__init__.py``)."""
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest project module that ``name`` (a dotted path) is or lies in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement reaches (``from a import b`` yields ``a.b``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".")
            anchor = anchor if is_package else anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (self-imports left out)."""
    modules = project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for dotted in _imported(node, name, path.name == "__init__.py"):
                target = _resolve(dotted, modules)
                if target is not None and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walker_sees_circles_of_every_kind() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_imports_under_type_checking_and_in_functions_count() -> None:
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.q import R\ndef f():\n    import p.s\n"
    names = {n for node in ast.walk(ast.parse(src)) for n in _imported(node, "p.m", False)}
    assert {"p.q", "p.q.R", "p.s"} <= names
    rel = ast.parse("from .sib import x\nfrom .. import up\n")
    assert {n for node in ast.walk(rel) for n in _imported(node, "p.sub.m", False)} >= {"p.sub.sib", "p.up"}


def test_no_import_circles_in_the_project() -> None:
    graph = import_graph()
    assert len(graph) > 100 and "scheduler.scheduler" in graph
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)
