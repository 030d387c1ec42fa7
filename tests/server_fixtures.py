"""Start servers for tests: in a thread (shared per process) or as a subprocess, on 127.0.0.1 only.

Invariants: every server binds 127.0.0.1 on a port the OS picked (in-thread servers get the bound
socket itself, so there is no port race); every wait is bounded; ``shared_server()`` builds one real
``LLMEngine`` on the embedded default model per test process and stops it at exit; ``FakeEngine`` is a
pure-Python stand-in (no model, no torch) for fast tests of the app and the engine thread.
"""

from __future__ import annotations

import atexit
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.engine_stats import EngineStats, RoutingStats
from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.outputs import CompletionOutput, RequestMetrics, RequestOutput
from agent_engine.server.launcher import ServerProcess, start_engine_server
from agent_engine.server.server_config import ServerConfig
from scheduler import SchedulerStats

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

    @property
    def state(self) -> Any:
        return self.app.state.server

    @property
    def engine(self) -> Any:
        return self.async_engine.engine

    def stats(self) -> EngineStats:
        return self.async_engine.stats_sync(timeout=30)

    def wait_idle(self, timeout: float = 30.0) -> EngineStats:
        """Poll engine stats until nothing runs or waits; returns the last stats."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if s.scheduler.num_running == 0 and s.scheduler.num_waiting == 0:
                return s
            if time.monotonic() > deadline:
                return s
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


# Tests drain for at most 2 s and keep uvicorn quiet.
TEST_SERVER_CONFIG = ServerConfig(drain_timeout=2.0, log_level="warning")


def start_thread_server(async_engine: Any, server_config: ServerConfig = TEST_SERVER_CONFIG, *,
                        startup_timeout: float = 60.0) -> ThreadServer:
    """Serve ``async_engine`` through ``build_app`` on a fresh 127.0.0.1 socket in a daemon thread
    (``server_config``'s host and port are not used: the socket is bound here)."""
    import uvicorn

    from agent_engine.server.app import build_app
    from agent_engine.server.edge_middleware import header_deadline_protocol

    app = build_app(async_engine, server_config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level=server_config.log_level, access_log=False,
                            timeout_graceful_shutdown=max(1, int(server_config.drain_timeout)),
                            http=header_deadline_protocol(server_config.header_timeout))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn-test")
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    return ThreadServer(f"http://127.0.0.1:{port}", app, async_engine, server, thread)


def assert_error(r: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """``r`` (an httpx response) has ``status`` and an OpenAI error body (with ``code`` if given)."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["message"]
    if code is not None:
        assert err["code"] == code
    return err


def post_api(srv: ThreadServer, path: str, body: Any, **kw: Any) -> Any:
    """POST ``body`` (JSON, or raw bytes sent as ``application/json``) to ``srv``; the httpx response."""
    import httpx

    if isinstance(body, (dict, list)):
        return httpx.post(srv.base_url + path, json=body, timeout=60, **kw)
    return httpx.post(srv.base_url + path, content=body, timeout=60,
                      headers={"content-type": "application/json", **kw.pop("headers", {})}, **kw)


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
    engine.add_request(engine.make_request(request_id, prompt, params))
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.request_id == request_id and out.finished:
                final = out
    assert final is not None
    return final


def start_subprocess_server(extra_args: list[str], log_path: Path,
                            startup_timeout: float = 90.0) -> ServerProcess:
    """``python -m agent_engine.server.serve`` on 127.0.0.1:<free port>, healthy (via ``launcher``)."""
    return start_engine_server(extra_args, log_path, startup_timeout=startup_timeout)


LETTERS = "abcdefghijklmnopqrstuvwxyz"


class FakeTokenizer:
    """Token ``t`` is the letter ``LETTERS[t]``; a text's character ``c`` is token ``ord(c) % 26``."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) % len(LETTERS) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(LETTERS[t] for t in ids)

    def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
                            tokenize: bool = False) -> str:
        text = "".join(f"{m['role']}:{m['content']};" for m in messages)
        return text + "assistant:" if add_generation_prompt else text


@dataclass
class _FakeRequest:
    request_id: str
    prompt: str | None
    prompt_ids: list[int]
    params: Any
    job_id: str | None
    is_last_step: bool
    arrival: float
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    first_token_time: float | None = None


class FakeEngine:
    """A pure-Python stand-in for ``LLMEngine`` (no model), with every member of the server's
    ``EngineLike``: every step adds one token to every request,
    the token after its last one (mod 26), so a request's text is ``FakeEngine.expected_text`` and it
    ends with "length" after ``max_tokens``. A prompt containing ``FAIL`` ends with finish reason "error"
    (a failed model step). A job whose last request was not its last step holds a "pin" until released.
    ``step_delay`` seconds per busy step make long requests take real time (for disconnect tests)."""

    model_name = "fake-model"
    vocab_size = len(LETTERS)
    FAIL = "FAIL"

    def __init__(self, max_model_len: int = 4096, step_delay: float = 0.0) -> None:
        self.max_model_len = max_model_len
        self.step_delay = step_delay
        self.config = EngineConfig()
        self.tokenizer = FakeTokenizer()
        self.tool_readers: list[tuple[str, Any]] = []  # (request id, its EngineRequest's tool_reader)
        self.reqs: dict[str, _FakeRequest] = {}
        self.pinned_jobs: set[str] = set()
        self.num_failed_steps = 0
        self.grammars_compiled: list[Any] = []
        self.job_listeners: list[Any] = []

    @staticmethod
    def expected_text(prompt_ids: list[int], n: int) -> str:
        return "".join(LETTERS[(prompt_ids[-1] + k) % len(LETTERS)] for k in range(1, n + 1))

    def tokenize_prompt(self, prompt: Any) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            return prompt, self.tokenizer.encode(prompt)
        return None, list(prompt)

    def compile_grammar(self, spec: Any, limits: Any, cancel: Any, fast: bool = False) -> ReadyGrammar:
        """No grammar library here: every constraint is "compiled" to a placeholder (and not enforced)."""
        self.grammars_compiled.append(spec)
        return ReadyGrammar(spec, None)  # type: ignore[arg-type]

    def cached_grammar(self, spec: Any) -> ReadyGrammar | None:
        return None  # no cache: every constraint goes to a compile lane

    def add_request(self, request: EngineRequest) -> None:
        ids, params, hints = list(request.prompt_token_ids), request.params, request.hints
        if any(not 0 <= t < self.vocab_size for t in ids):
            raise ValueError(f"a token id is outside the vocabulary (size {self.vocab_size})")
        if len(ids) + params.max_tokens > self.max_model_len:
            raise ValueError(f"prompt ({len(ids)} tokens) + max_tokens ({params.max_tokens}) exceeds "
                             f"max_model_len ({self.max_model_len})")
        if request.tool_reader is not None:
            self.tool_readers.append((request.request_id, request.tool_reader))
        self.reqs[request.request_id] = _FakeRequest(request.request_id, request.prompt_text, ids, params,
                                                     hints.job_id, hints.is_last_step, time.monotonic())

    def has_unfinished_requests(self) -> bool:
        return bool(self.reqs)

    def abort(self, request_ids: Any) -> None:
        for rid in request_ids:
            self.reqs.pop(rid, None)

    def knows_job(self, job_id: str) -> bool:
        return job_id in self.pinned_jobs

    def release_job(self, job_id: str) -> bool:
        held = job_id in self.pinned_jobs
        self.pinned_jobs.discard(job_id)
        return held

    def holds_pins(self) -> bool:
        return bool(self.pinned_jobs)

    def listen_to_jobs(self, listener: Any) -> None:
        self.job_listeners.append(listener)  # told of nothing: the fake has no job table

    def release_all_jobs(self) -> int:
        n = len(self.pinned_jobs)
        self.pinned_jobs.clear()
        return n

    def step(self) -> list[RequestOutput]:
        if self.step_delay and self.reqs:
            time.sleep(self.step_delay)
        now = time.monotonic()
        return [self._advance(r, now) for r in list(self.reqs.values())]

    def stats(self) -> EngineStats:
        n = len(self.reqs)
        sched = SchedulerStats(num_running=n, num_waiting=0, num_blocks=100, blocks_in_use=n, blocks_cached_free=0,
                               blocks_empty=100 - n, blocks_pinned=0, blocks_soft=0, pin_block_refs=0,
                               prefix_query_tokens=0, prefix_hit_tokens=0, num_preemptions=0,
                               num_pinned_jobs=len(self.pinned_jobs))
        return EngineStats(sched, num_failed_steps=self.num_failed_steps, max_model_len=self.max_model_len,
                           block_size=16)

    def routing_stats(self) -> RoutingStats:
        n = len(self.reqs)
        active = tuple(sorted({r.job_id for r in self.reqs.values() if r.job_id}))
        return RoutingStats(tuple(sorted(self.pinned_jobs)), active, free_blocks=100 - n, num_blocks=100,
                            num_waiting=0, num_running=n)

    def _advance(self, r: _FakeRequest, now: float) -> RequestOutput:
        if self.FAIL in (r.prompt or ""):
            del self.reqs[r.request_id]
            self.num_failed_steps += 1
            return self._output(r, [], "", "error", now)
        tok = ((r.tokens or r.prompt_ids)[-1] + 1) % self.vocab_size
        r.tokens.append(tok)
        r.text += LETTERS[tok]
        r.first_token_time = r.first_token_time or now
        if len(r.tokens) < r.params.max_tokens:
            return self._output(r, [tok], LETTERS[tok], None, now)
        del self.reqs[r.request_id]
        if r.job_id is not None and not r.is_last_step:
            self.pinned_jobs.add(r.job_id)
        return self._output(r, [tok], LETTERS[tok], "length", now)

    def _output(self, r: _FakeRequest, new_ids: list[int], new_text: str, finish: str | None,
                now: float) -> RequestOutput:
        k = r.params.logprobs
        lps = None if k is None else [-0.5] * len(r.tokens)
        top = None if not k else [[((t + j) % self.vocab_size, -0.5 - j) for j in range(k)] for t in r.tokens]
        comp = CompletionOutput(0, r.text, list(r.tokens), finish, lps, top)
        metrics = RequestMetrics(r.arrival, r.arrival, r.first_token_time, now if finish else None)
        return RequestOutput(r.request_id, r.prompt, list(r.prompt_ids), [comp], finish is not None,
                             new_token_ids=new_ids, new_text=new_text, metrics=metrics, job_id=r.job_id)
