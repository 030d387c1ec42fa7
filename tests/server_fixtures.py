"""Start real servers for tests: in a thread (shared per process) or as a subprocess, on 127.0.0.1 only.

Invariants: every server binds 127.0.0.1 on a port the OS picked (in-thread servers get the bound
socket itself, so there is no port race); every wait is bounded; ``shared_server()`` builds one real
``LLMEngine`` on the embedded default model per test process and stops it at exit.
"""

from __future__ import annotations

import atexit
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_engine.server.launcher import ServerProcess, start_engine_server

# Small pool and context keep the embedded model fast on 2 CPU cores.
ENGINE_KW: dict[str, Any] = {"num_kv_blocks": 512, "max_model_len": 1024, "max_num_seqs": 64}


@dataclass
class ThreadServer:
    """A uvicorn server running ``app`` in a daemon thread."""

    base_url: str
    app: Any
    async_engine: Any
    server: Any
    thread: threading.Thread
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> Any:
        return self.app.state.server

    @property
    def engine(self) -> Any:
        return self.async_engine.engine

    def stats(self) -> dict[str, Any]:
        return dict(self.async_engine.call_sync(lambda e: e.stats(), timeout=30))

    def wait_idle(self, timeout: float = 30.0) -> dict[str, Any]:
        """Poll engine stats until nothing runs or waits; returns the last stats."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if s["num_running"] == 0 and s["num_waiting"] == 0:
                return s
            if time.monotonic() > deadline:
                return s
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_thread_server(async_engine: Any, *, api_key: str | None = None, max_waiting: int | None = None,
                        startup_timeout: float = 60.0) -> ThreadServer:
    """Serve ``async_engine`` through ``build_app`` on a fresh 127.0.0.1 socket in a daemon thread."""
    import uvicorn

    from agent_engine.server.app import build_app

    app = build_app(async_engine, api_key=api_key, max_waiting=max_waiting, drain_timeout=2.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn-test")
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    return ThreadServer(f"http://127.0.0.1:{port}", app, async_engine, server, thread)


def build_engine(**overrides: Any) -> Any:
    """A real ``LLMEngine`` on the embedded default model with the small test config."""
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine

    return LLMEngine(EngineConfig(**{**ENGINE_KW, **overrides}))


_SHARED: dict[str, ThreadServer] = {}
_SHARED_LOCK = threading.Lock()


def shared_server() -> ThreadServer:
    """One real server per test process (all server test modules share it; state is reset by tests)."""
    from agent_engine.server.async_engine import AsyncEngine

    with _SHARED_LOCK:
        if "real" not in _SHARED:
            srv = start_thread_server(AsyncEngine(build_engine()))
            _SHARED["real"] = srv
            atexit.register(srv.stop, 10.0)
        return _SHARED["real"]


_REFERENCE: dict[str, Any] = {}


def reference_engine() -> Any:
    """A second, in-process engine with the same model and config (for greedy-equality checks)."""
    if "engine" not in _REFERENCE:
        _REFERENCE["engine"] = build_engine()
    return _REFERENCE["engine"]


def engine_generate(engine: Any, prompt: Any, params: Any, request_id: str = "ref") -> Any:
    """Run one request to completion on an engine owned by the calling thread; returns the final output."""
    engine.add_request(request_id, prompt, params)
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.request_id == request_id and out.finished:
                final = out
    assert final is not None
    return final


def start_subprocess_server(extra_args: list[str], log_path: Path, startup_timeout: float = 90.0) -> ServerProcess:
    """``python -m agent_engine.server.serve`` on 127.0.0.1:<free port>, healthy (the benchmarks' launcher)."""
    return start_engine_server(extra_args, log_path, startup_timeout=startup_timeout)
