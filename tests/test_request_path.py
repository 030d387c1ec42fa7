"""A request's path, route to policy, stays short and is the one written down in
``docs/architecture.md`` ("A request's path"), as the code has it, not as a list written here.

The check follows the ids through the source (``id_flow``: an AST walk from the route along the names
that carry the job id and the request id, through calls, ``self`` attributes (the engine thread's
command queue) and return values, across modules) to the policy's ``on_job_arrival``. The files it
crosses are those of the functions on the shortest such chain and of what makes the values each hands
on (the hints' reader, the tenant's namespace, the messages and the requests they ride in). Their
number is bounded (``MAX_FILES``): a hop added in the code is counted, and the doc must name each file.
The engine's request message is imported by only the few modules that make or take it.
"""

from __future__ import annotations

import ast
import textwrap
from functools import cache
from pathlib import Path

import pytest
from id_flow import Flow, Fn, follow

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("agent_engine/server", "agent_engine/engine", "scheduler")
MAX_FILES = 16
# Each route, and the names it binds the ids to (the job's hints, the request id).
ROUTES: dict[Fn, set[str]] = {
    ("agent_engine/server/openai_routes.py", "chat"): {"hints", "base"},
    ("agent_engine/server/anthropic/routes.py", "create_message"): {"hints", "call"},
}
POLICY: Fn = ("scheduler/policy/continuum.py", "ContinuumPolicy.on_job_arrival")
MESSAGE_MODULE = "agent_engine/engine/engine_request.py"
# Who makes or takes the engine's request message inside agent_engine (besides its own module).
MESSAGE_IMPORTERS = {"agent_engine/server/async_engine.py", "agent_engine/server/engine_like.py",
                     "agent_engine/server/engine_commands.py", "agent_engine/engine/llm_engine.py"}

pytestmark = pytest.mark.core


@cache
def _flow(route: Fn) -> Flow:
    return follow(ROOT, SCANNED, route, ROUTES[route])


@cache
def _crossed(route: Fn) -> dict[str, set[str]]:
    chain = _flow(route).path(POLICY, route)
    assert chain, f"the ids do not reach {POLICY} from {route}"
    return _flow(route).crossed(chain)


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: r[0])
def test_the_ids_reach_the_policy_through_the_engine_thread(route: Fn) -> None:
    chain = [fn for _, fn in _flow(route).path(POLICY, route)]
    # In order: the server's admission, the engine thread's queue, the engine, the scheduler, its job table.
    for step in ("ServerState.admit", "AsyncEngine.submit", "AsyncEngine._enqueue", "AsyncEngine._apply",
                 "LLMEngine.add_request", "Scheduler.add_request", "JobTable.arrive"):
        assert step in chain, (step, chain)
    assert chain.index("AsyncEngine._enqueue") < chain.index("AsyncEngine._apply") < chain.index(
        "LLMEngine.add_request")


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: r[0])
def test_the_path_crosses_at_most_max_files(route: Fn) -> None:
    crossed = _crossed(route)
    # What makes the carriers is counted: the hints' reader, the tenant's namespace, the messages.
    assert {"agent_engine/server/hints.py", "scheduler/job_hints.py", MESSAGE_MODULE, "scheduler/request.py",
            "agent_engine/server/engine_commands.py"} <= set(crossed)
    assert len(crossed) <= MAX_FILES, sorted(crossed)


def test_the_architecture_doc_names_the_path() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## A request's path", 1)[1].split("\n## ", 1)[0]
    for route in ROUTES:
        for path in _crossed(route):
            assert path.removeprefix("agent_engine/") in section, path
    assert f"within {MAX_FILES} files" in section


def test_the_request_message_is_made_or_taken_by_few_modules() -> None:
    importers = set()
    for path in (ROOT / "agent_engine").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        for n in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(n, ast.ImportFrom) and n.module == "agent_engine.engine.engine_request":
                importers.add(rel)
    assert importers == MESSAGE_IMPORTERS
    assert len(importers | {MESSAGE_MODULE}) <= MAX_FILES


def test_the_walk_counts_a_hop_added_in_the_code(tmp_path: Path) -> None:
    """A hop nobody listed (a queue drained by another method, a helper in a new file) is found."""
    (tmp_path / "app").mkdir()
    files = {
        "route.py": """
            from app.relay import Relay
            def route(body):
                job_id = body["job"]
                Relay().send(job_id, 3)
            """,
        "relay.py": """
            from app.wrap import wrapped
            from app.sink import Sink
            class Relay:
                def send(self, job_id, n):
                    self.queue.append(wrapped(job_id))
                def drain(self):
                    for item in self.queue:
                        Sink().take(item)
            """,
        "wrap.py": """
            def wrapped(job_id):
                return ("job", job_id)
            """,
        "sink.py": """
            class Sink:
                def take(self, item):
                    return item
            """,
    }
    for name, source in files.items():
        (tmp_path / "app" / name).write_text(textwrap.dedent(source))
    start = ("app/route.py", "route")
    flow = follow(tmp_path, ["app"], start, {"job_id"})
    chain = flow.path(("app/sink.py", "Sink.take"), start)
    assert [fn for _, fn in chain] == ["route", "Relay.send", "Relay.drain", "Sink.take"]
    assert set(flow.crossed(chain)) == {"app/route.py", "app/relay.py", "app/wrap.py", "app/sink.py"}
