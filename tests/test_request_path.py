"""A request's path, route to policy, stays short and is the one written down in
``docs/architecture.md`` ("A request's path").

``HOPS`` are the steps a job id takes: in each, a function of one file hands it on by calling the next
file's function (the job table publishes an event to its listeners by the hook's name). The check
reads the source (AST): every hop's call is there, every callee is defined where the table says, the
hops form one chain from the route to the policy, and the chain crosses at most ``MAX_FILES`` files
of code that handles the id. The values the id rides in (``CARRIERS``: ``JobHints``, the engine's
``EngineRequest``, the scheduler's ``Request``, each a type in a module of its own) are built where
the table says, and the engine's request message is imported by only the few modules that make or
take it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FILES = 8
ROUTES = ("agent_engine/server/openai_routes.py", "agent_engine/server/anthropic/routes.py")
POLICY = "scheduler/policy/continuum.py"
# (caller file, caller function, callee file, callee function): the job id is handed on by this call.
HOPS = (
    ("agent_engine/server/openai_routes.py", "_hints", "agent_engine/server/hints.py", "request_hints"),
    ("agent_engine/server/openai_routes.py", "chat", "agent_engine/server/state.py", "admit"),
    ("agent_engine/server/state.py", "admit", "agent_engine/server/async_engine.py", "submit"),
    ("agent_engine/server/async_engine.py", "_add_group", "agent_engine/engine/llm_engine.py", "add_request"),
    ("agent_engine/engine/llm_engine.py", "add_request", "scheduler/scheduler.py", "add_request"),
    ("scheduler/scheduler.py", "add_request", "scheduler/job_table.py", "arrive"),
    ("scheduler/job_table.py", "arrive", POLICY, "on_job_arrival"),
)
# The anthropic route takes the same steps from ``hints`` on.
SIDE_ENTRIES = (
    ("agent_engine/server/anthropic/routes.py", "_hints", "agent_engine/server/hints.py", "request_hints"),
    ("agent_engine/server/anthropic/routes.py", "_submit", "agent_engine/server/state.py", "admit"),
)
# (file, function, value): the function builds the value the id rides in on the next hops.
CARRIERS = (
    ("agent_engine/server/hints.py", "request_hints", "JobHints"),  # scheduler/job_hints.py
    ("agent_engine/server/async_engine.py", "_prepare", "EngineRequest"),  # engine/engine_request.py
    ("agent_engine/engine/llm_engine.py", "add_request", "Request"),  # scheduler/request.py
)
MESSAGE_MODULE = "agent_engine/engine/engine_request.py"
# Who makes or takes the engine's request message inside agent_engine (besides its own module).
MESSAGE_IMPORTERS = {"agent_engine/server/async_engine.py", "agent_engine/server/engine_like.py",
                     "agent_engine/engine/llm_engine.py"}

pytestmark = pytest.mark.core


@cache
def _tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(), filename=path)


def _function(path: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    found = [n for n in ast.walk(_tree(path))
             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]
    assert len(found) == 1, f"{path}: {len(found)} functions named {name}"
    return found[0]


def _calls(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            names.add(n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", ""))
    return names


def _published(node: ast.AST) -> set[str]:
    """The hooks a job-table event publishes: the names passed to ``_publish``."""
    return {n.args[0].value for n in ast.walk(node)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "_publish"
            and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)}


def _defines(path: str, name: str) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name
               for n in ast.walk(_tree(path)))


def test_each_hop_hands_the_job_id_to_the_next_file() -> None:
    for caller, fn, callee, target in HOPS + SIDE_ENTRIES:
        body = _function(caller, fn)
        assert target in _calls(body) | _published(body), f"{caller}:{fn} does not call {target}"
        assert _defines(callee, target), f"{callee} defines no {target}"


def test_the_hops_are_one_chain_from_the_route_to_the_policy_within_the_file_limit() -> None:
    reached = {ROUTES[0]}
    for caller, _, callee, _ in HOPS:
        assert caller in reached, f"{caller} is not reached from the route"
        reached.add(callee)
    assert POLICY in reached
    callees = [callee for _, _, callee, _ in HOPS]
    assert len(set(callees)) == len(callees), "a file is visited twice"
    assert len(reached) <= MAX_FILES, sorted(reached)


def test_the_values_the_job_id_rides_in_are_built_on_the_path() -> None:
    path_files = {f for hop in HOPS for f in (hop[0], hop[2])}
    for path, fn, value in CARRIERS:
        assert path in path_files
        assert value in _calls(_function(path, fn)), f"{path}:{fn} does not build {value}"


def test_the_request_message_is_made_or_taken_by_few_modules() -> None:
    importers = set()
    for path in (ROOT / "agent_engine").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        for n in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(n, ast.ImportFrom) and n.module == "agent_engine.engine.engine_request":
                importers.add(rel)
    assert importers == MESSAGE_IMPORTERS
    assert len(importers | {MESSAGE_MODULE}) <= MAX_FILES


def test_the_architecture_doc_names_the_path() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## A request's path", 1)[1].split("\n## ", 1)[0]
    for path in {f for hop in HOPS for f in (hop[0], hop[2])} | {MESSAGE_MODULE}:
        assert path.removeprefix("agent_engine/") in section, path
