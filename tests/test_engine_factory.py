"""How a server builds its engine: on a thread of its own that has ended before serving starts."""

from __future__ import annotations

import argparse

import pytest

from agent_engine.server.serve import add_arguments

pytestmark = pytest.mark.core


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def test_engine_is_built_on_a_thread_that_ends(monkeypatch: pytest.MonkeyPatch):
    """``serve`` builds its engine on a thread of its own that has ended by the time it serves (no
    OpenMP pool outlives the build besides the engine thread's); the helper hands back the result or
    re-raises the builder's exception."""
    import threading

    from agent_engine.engine import factory, llm_engine
    from agent_engine.server import serve

    seen: list[threading.Thread] = []

    def record() -> str:
        seen.append(threading.current_thread())
        return "built"

    assert factory.run_on_own_thread(record) == "built"
    assert seen[0] is not threading.main_thread() and not seen[0].is_alive()
    def fail() -> str:
        raise ValueError("bad model")

    with pytest.raises(ValueError, match="bad model"):
        factory.run_on_own_thread(fail)

    class Stop(Exception):
        pass

    def fake_engine(config: object) -> None:
        seen.append(threading.current_thread())
        raise Stop

    monkeypatch.setattr(llm_engine, "LLMEngine", fake_engine)
    with pytest.raises(Stop):
        serve.run_serve(_serve_parser().parse_args([]))
    assert seen[-1] is not threading.main_thread() and seen[-1].name == "engine-builder"
