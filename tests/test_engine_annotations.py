"""No ``Any`` inside the engine: its modules' signatures and attributes name real types (concrete ones,
or the protocols the engine defines), so what crosses the engine's boundaries is checked by reading.

An AST scan of every annotation (parameters, returns, annotated assignments, quoted annotations) and
of every name the modules take from ``typing``, over the engine (``agent_engine/engine``), its
server-side seam, the scheduler and the estimator. JSON from clients is ``object`` (or a mapping of
``object``) until checked, never ``Any``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINE_MODULES = sorted(
    [*(ROOT / "agent_engine" / "engine").glob("*.py"), *(ROOT / "scheduler").rglob("*.py"),
     *(ROOT / "estimator").rglob("*.py")]
    + [ROOT / "agent_engine" / "server" / "engine_like.py", ROOT / "agent_engine" / "server" / "async_engine.py",
       ROOT / "agent_engine" / "cluster" / "ingress.py"])

pytestmark = pytest.mark.core


def _annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation expression of ``tree`` (quoted ones parsed)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
    parsed = []
    for ann in found:
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            ann = ast.parse(ann.value, mode="eval").body
        parsed.append(ann)
    return parsed


def _names_any(expr: ast.AST) -> bool:
    return any((isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
               for n in ast.walk(expr))


def _any_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    uses = [f"line {ann.lineno}: {ast.unparse(ann)}" for ann in _annotations(tree) if _names_any(ann)]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "typing" and any(a.name == "Any" for a in node.names):
            uses.append(f"line {node.lineno}: from typing import Any")
    return uses


def test_the_scan_covers_the_engine_and_its_server_side() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in ENGINE_MODULES}
    assert {"agent_engine/engine/llm_engine.py", "agent_engine/engine/factory.py",
            "agent_engine/engine/engine_request.py", "agent_engine/server/async_engine.py",
            "agent_engine/server/engine_like.py", "agent_engine/cluster/ingress.py",
            "agent_engine/engine/job_hooks.py", "agent_engine/engine/job_inference.py",
            "scheduler/scheduler.py", "scheduler/job_table.py", "estimator/estimator.py"} <= names


def test_the_scan_finds_any_where_it_is() -> None:
    tree = ast.parse("from typing import Any\ndef f(x: 'dict[str, Any]') -> typing.Any: ...\ny: list[Any] = []")
    assert sorted(ast.unparse(a) for a in _annotations(tree) if _names_any(a)) == [
        "dict[str, Any]", "list[Any]", "typing.Any"]


@pytest.mark.parametrize("path", ENGINE_MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_any_in_the_engines_annotations(path: Path) -> None:
    assert _any_uses(path) == []
