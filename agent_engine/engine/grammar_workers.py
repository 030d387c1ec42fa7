"""Worker processes that try each new grammar first, under a time budget, and die when it runs out.

xgrammar cannot stop a compile once it started, and a grammar's compile time is hard to foresee (n
optional JSON properties cost O(n^2): 400 take seconds, 5,000 ran for over ten minutes). So a new
constraint is first prepared (``grammar_build.prepare_grammar``: converted, size-capped, checked for
output, pruned) *and compiled* in a worker process, which is killed when the request's budget runs
out or the request is cancelled. Only a grammar whose trial compile finished is compiled again where
it is used (a compiled grammar does not cross processes cheaply: its serialized form is ~50x its size
and slower to write than to compile), so the server process only ever compiles what is known to end.

Invariants:
- ``prepare`` uses one slot of its lane for the whole call and blocks while none is free: ``processes``
  slots on the main lane, ``fast_processes`` on the fast lane (constraints expected to be cheap, tried
  within ``limits.fast_timeout_s``; past it ``FastLaneExceeded``, not a refusal: the caller tries the
  main lane). A slot runs one job at a time, and its process is killed (SIGKILL) on timeout, on
  ``cancel`` and on any broken pipe, then restarted by the slot's next job. ``close`` kills every
  process; nothing waits for a running compile.
- A worker that dies while it compiles (killed from outside: the out-of-memory killer, an operator) is
  ``GrammarWorkerDied`` (the server's 503: retry), never a refusal of the constraint. Dead helper
  processes of multiprocessing (the fork server, the resource tracker) are reaped, and relaunched, by
  the next trial compile, so none stays a zombie of the server process.
- The budget counts the job only (not a worker's start-up, which has ``STARTUP_TIMEOUT_S`` of its own).
- Workers are forked from multiprocessing's fork server with xgrammar imported once (``PRELOAD``), so a
  restart costs milliseconds, and they run below the engine's step loop: main-lane workers at
  ``WORKER_NICE``, fast-lane ones at ``FAST_WORKER_NICE`` (a cheap compile is not starved by the
  expensive ones beside it; it still yields to the step loop).
- The worker holds only the tokenizer's vocabulary (``TokenizerInfo``, serialized once); it never
  imports the engine or the model.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

from agent_engine.engine.grammar_build import (
    INVALID,
    TOO_SLOW,
    GrammarRefused,
    compile_prepared,
    first_line,
    prepare_grammar,
)
from agent_engine.engine.grammar_limits import DEFAULT_GRAMMAR_WORKERS, GrammarLimits
from scheduler import StructuredSpec

STARTUP_TIMEOUT_S = 120.0
WORKER_NICE = 10
FAST_WORKER_NICE = 5
POLL_S = 0.05
PRELOAD = ["xgrammar", "agent_engine.engine.grammar_build"]


class GrammarCancelled(RuntimeError):
    """The request went away while its grammar was being tried; the worker was killed."""


class FastLaneExceeded(RuntimeError):
    """A constraint tried on the fast lane did not compile within its budget there (the worker was
    killed); it is no refusal: try it on the main lane."""


class GrammarWorkerDied(RuntimeError):
    """The worker process died while it compiled (killed from outside); the constraint is not to blame."""


def _context() -> multiprocessing.context.ForkServerContext:
    """The fork server's context, preloading xgrammar and the package of the main module (every
    multiprocessing child runs the main module again: with its package's imports preloaded, a worker's
    restart does not pay for them; the module itself is not preloaded, which runpy would warn about)."""
    ctx = multiprocessing.get_context("forkserver")
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    package = main_spec.parent if main_spec is not None else ""
    ctx.set_forkserver_preload(PRELOAD + ([package] if package else []))
    return ctx


class _Slot:
    """One worker process (started on demand) and the pipe to it."""

    def __init__(self, tokenizer_info: str, nice: int = WORKER_NICE) -> None:
        self.tokenizer_info = tokenizer_info
        self.nice = nice
        self.process: multiprocessing.process.BaseProcess | None = None
        self.conn: Connection | None = None

    def ready(self, cancel: threading.Event) -> Connection:
        """The pipe to a live, initialised worker (started now if needed)."""
        if self.process is not None and self.process.is_alive() and self.conn is not None:
            return self.conn
        self.kill()
        parent, child = multiprocessing.Pipe()
        proc = _context().Process(target=_serve, args=(child, self.tokenizer_info, self.nice), name="grammar-worker",
                                  daemon=True)
        proc.start()
        child.close()
        self.process, self.conn = proc, parent
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        if not _wait(parent, deadline, cancel):
            self.kill()
            if cancel.is_set():
                raise GrammarCancelled("cancelled while a grammar worker started")
            raise RuntimeError(f"a grammar worker did not start within {STARTUP_TIMEOUT_S:g} s")
        if parent.recv() != "ready":
            self.kill()
            raise RuntimeError("a grammar worker failed to start")
        return parent

    def kill(self) -> int | None:
        """Kill the worker (if any; it is waited for) and return its exit code (negative: its signal)."""
        proc, conn = self.process, self.conn
        self.process = self.conn = None
        code = None
        if conn is not None:
            conn.close()
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.kill()  # first: once its exit code was read (even a wrong one), kill() does nothing
                proc.join(5.0)
                code = proc.exitcode
                proc.close()
        return code


class GrammarWorkers:
    """Worker slots for one tokenizer, on two lanes (see the module docstring). Thread-safe."""

    def __init__(self, tokenizer_info: str, processes: int = DEFAULT_GRAMMAR_WORKERS, fast_processes: int = 1) -> None:
        if processes < 1 or fast_processes < 1:
            raise ValueError("grammar workers must be at least 1")
        self._slots = [_Slot(tokenizer_info) for _ in range(processes)]  # the main lane
        self._fast_slots = [_Slot(tokenizer_info, FAST_WORKER_NICE) for _ in range(fast_processes)]
        self._idle: dict[bool, queue.SimpleQueue[_Slot]] = {False: queue.SimpleQueue(), True: queue.SimpleQueue()}
        for fast, slots in ((False, self._slots), (True, self._fast_slots)):
            for slot in slots:
                self._idle[fast].put(slot)
        self._closed = False
        self._started = False  # a worker was started (so multiprocessing's helpers run)
        self._lock = threading.Lock()
        self.timed_out = 0  # trial compiles killed at their budget
        self.cancelled = 0  # trial compiles killed because their request went away
        self.demoted = 0  # fast-lane trials killed at the fast budget (then tried on the main lane)
        self.died = 0  # workers that died while compiling

    def prepare(self, spec: StructuredSpec, limits: GrammarLimits, cancel: threading.Event, fast: bool = False) -> str:
        """The prepared grammar of ``spec`` once a worker compiled it within ``limits.timeout_s``
        (``limits.fast_timeout_s`` on the fast lane). Raises ``GrammarRefused`` (refused, or over the
        budget), ``FastLaneExceeded`` (over the fast budget), ``GrammarCancelled`` (``cancel`` set),
        ``GrammarWorkerDied``, RuntimeError (a worker did not start or the pool is closed)."""
        if self._started:
            _reap_helpers()
        budget = limits.fast_timeout_s if fast else limits.timeout_s
        slot = self._idle[fast].get()
        try:
            if self._closed:
                raise RuntimeError("the grammar workers are shut down")
            self._started = True
            conn = slot.ready(cancel)
            try:
                conn.send((spec, limits.max_size))
                finished = _wait(conn, time.monotonic() + budget, cancel)
                reply = conn.recv() if finished else None
            except (EOFError, OSError):
                code = slot.kill()
                if self._closed:
                    raise RuntimeError("the grammar workers are shut down") from None
                if cancel.is_set():
                    raise GrammarCancelled("the request went away while its grammar compiled") from None
                with self._lock:
                    self.died += 1
                _reap_helpers()
                raise GrammarWorkerDied("the grammar compile worker died while compiling this output format "
                                        f"({_exit_reason(code)}); it is restarted: retry the request") from None
            if reply is None:
                slot.kill()
                with self._lock:
                    if cancel.is_set():
                        self.cancelled += 1
                    elif fast:
                        self.demoted += 1
                    else:
                        self.timed_out += 1
                if cancel.is_set():
                    raise GrammarCancelled("the request went away while its grammar compiled")
                if fast:
                    raise FastLaneExceeded(f"no compile within the fast lane's {budget:g} s")
                raise GrammarRefused(f"the output format's grammar did not compile within {limits.timeout_s:g} s "
                                     "(--grammar-compile-timeout); simplify it (fewer optional properties, "
                                     "shorter enums and alternations)", TOO_SLOW)
        finally:
            self._idle[fast].put(slot)
        status, payload, code = reply
        if status != "ok":
            raise GrammarRefused(payload, code)
        return payload

    def close(self) -> None:
        """Kill every worker now (a running compile is not waited for); later ``prepare`` calls fail."""
        self._closed = True
        for slot in self._slots + self._fast_slots:
            slot.kill()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "it exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (", e.g. by the out-of-memory killer" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


def _reap_helpers() -> None:
    """Reap (and relaunch) multiprocessing's helper processes, the fork server and the resource tracker,
    if one died: a dead child of the server process stays a zombie until someone waits for it."""
    from multiprocessing import forkserver

    with contextlib.suppress(Exception):
        forkserver.ensure_running()  # checks the resource tracker first


def _wait(conn: Connection, deadline: float, cancel: threading.Event) -> bool:
    """Whether ``conn`` has a message before ``deadline``; False at once when ``cancel`` is set."""
    while not cancel.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if conn.poll(min(left, POLL_S)):
            return True
    return False


def _serve(conn: Connection, tokenizer_info: str, nice: int = WORKER_NICE) -> None:
    """The worker: for each ``(spec, max_size)`` prepare and compile, answer ``(status, payload, code)``."""
    with contextlib.suppress(OSError):
        os.nice(nice)
    import xgrammar

    compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo.deserialize_json(tokenizer_info), max_threads=1,
                                        cache_enabled=False)
    conn.send("ready")
    while True:
        try:
            spec, max_size = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the server closed the pipe; skip interpreter teardown (native libraries' leak reports)
        try:
            prepared = prepare_grammar(spec, max_size)
            compile_prepared(compiler, prepared)
            reply = ("ok", prepared, "")
        except GrammarRefused as exc:
            reply = ("refused", str(exc), exc.code)
        except Exception as exc:  # noqa: BLE001 - the library's error is the client's answer
            reply = ("refused", f"invalid {spec.kind} for structured output: {first_line(exc)}", INVALID)
        conn.send(reply)
