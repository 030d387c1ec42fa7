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


def test_a_bad_forced_isa_is_refused_before_the_model_loads(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``AGENT_ENGINE_ISA=garbage`` is the clean error at once, from the engine and from ``agent-engine
    serve`` (exit 2, one line), not after the model load; ignored with the kernels switched off."""
    from agent_engine.cli import main as cli
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.model import loader
    from kernels import cpp_build, isa

    monkeypatch.setenv(isa.ENV_FORCE, "garbage")
    monkeypatch.delenv(cpp_build.ENV_SWITCH, raising=False)
    monkeypatch.setattr(loader, "load_model", lambda *a, **k: pytest.fail("the model loaded before the check"))
    with pytest.raises(ValueError, match="'garbage' is unknown"):
        LLMEngine(EngineConfig())
    assert cli.main(["serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "agent-engine serve: error: instruction-set variant 'garbage' is unknown" in err
    monkeypatch.setenv(cpp_build.ENV_SWITCH, "0")
    cpp_build.check_forced_variant()  # the kernels are off: the variable means nothing
    monkeypatch.setenv(cpp_build.ENV_SWITCH, "1")
    monkeypatch.setenv(isa.ENV_FORCE, isa.supported_variants()[-1].name)
    capped: list[bool] = []  # torch's libraries stay as they are for the tests after this one
    monkeypatch.setattr(cpp_build, "cap_libraries", lambda: capped.append(True) or {})
    cpp_build.check_forced_variant()  # a variant this CPU runs: torch's libraries capped to it, before the model
    assert capped == [True]
