"""The worker processes that try each new grammar under a time budget (``engine.grammar_workers``):
a grammar past its budget, or whose request is cancelled, has its worker killed at once, and the next
grammar gets a fresh worker. Budgets here are far below the compile times they cut short, so a busy
machine only makes those compiles longer."""

from __future__ import annotations

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import xgrammar

from agent_engine.engine.grammar_build import EMPTY, INVALID, TOO_LARGE, TOO_SLOW, GrammarRefused
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.grammar_workers import (
    FAST_WORKER_NICE,
    WORKER_NICE,
    FastLaneExceeded,
    GrammarCancelled,
    GrammarWorkerDied,
    GrammarWorkers,
)
from scheduler import StructuredSpec

pytestmark = [pytest.mark.core, pytest.mark.timeout(300)]

SMALL = StructuredSpec.json({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
# About 10 s to compile on the embedded model's vocabulary on a quiet 2-core machine (O(n^2) in n).
SLOW = StructuredSpec.json({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)}})
# Several seconds to compile on any CPU seen so far (4.6 s on a Zen 5 EPYC): past the fast lane's 1 s
SLOWER = StructuredSpec.json({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(5000)}})
BUDGET = GrammarLimits(timeout_s=60.0)


@pytest.fixture(scope="module")
def workers() -> Iterator[GrammarWorkers]:
    info = xgrammar.TokenizerInfo([chr(i) for i in range(32, 127)] + [f"tok{i}" for i in range(4000)])
    pool = GrammarWorkers(info.serialize_json(), processes=1)
    yield pool
    pool.close()


def _pid(workers: GrammarWorkers, fast: bool = False) -> int | None:
    proc = (workers._fast_slots if fast else workers._slots)[0].process
    return None if proc is None else proc.pid


def test_a_grammar_compiles_in_a_lower_priority_worker(workers: GrammarWorkers) -> None:
    prepared = workers.prepare(SMALL, BUDGET, threading.Event())
    assert xgrammar.Grammar.deserialize_json(prepared) is not None
    pid = _pid(workers)
    assert pid is not None and pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, pid) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICE)


def test_refusals_come_back_with_their_code(workers: GrammarWorkers) -> None:
    cases = [(StructuredSpec.regex(r"[^\s\S]"), EMPTY), (StructuredSpec.grammar("root ::= "), INVALID)]
    for spec, code in cases:
        with pytest.raises(GrammarRefused) as exc:
            workers.prepare(spec, BUDGET, threading.Event())
        assert exc.value.code == code
    with pytest.raises(GrammarRefused) as exc:
        workers.prepare(SLOW, GrammarLimits(timeout_s=60.0, max_size=1000), threading.Event())
    assert exc.value.code == TOO_LARGE


def test_a_compile_past_its_budget_is_refused_and_its_worker_killed(workers: GrammarWorkers) -> None:
    workers.prepare(SMALL, BUDGET, threading.Event())
    before, timed_out = _pid(workers), workers.timed_out
    t0 = time.monotonic()
    with pytest.raises(GrammarRefused, match=r"did not compile within 0.5 s \(--grammar-compile-timeout\)") as exc:
        workers.prepare(SLOW, GrammarLimits(timeout_s=0.5), threading.Event())
    assert exc.value.code == TOO_SLOW and workers.timed_out == timed_out + 1
    assert time.monotonic() - t0 < 30.0  # refused at its budget, not when the compile would have ended
    assert _pid(workers) is None and before is not None and not _alive(before)
    workers.prepare(SMALL, BUDGET, threading.Event())  # a fresh worker takes the next grammar
    assert _pid(workers) not in (None, before)


def test_a_cancelled_compile_kills_its_worker_at_once(workers: GrammarWorkers) -> None:
    workers.prepare(SMALL, BUDGET, threading.Event())  # the worker is up: what follows times the compile
    cancel, outcome, cancelled = threading.Event(), [], workers.cancelled

    def run() -> None:
        try:
            workers.prepare(SLOW, BUDGET, cancel)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)
    pid = _pid(workers)
    cancel.set()
    thread.join(30.0)
    assert not thread.is_alive() and isinstance(outcome[0], GrammarCancelled)
    assert workers.cancelled == cancelled + 1
    assert pid is not None and not _alive(pid)


def test_a_worker_killed_from_outside_is_no_refusal_of_the_grammar(workers: GrammarWorkers) -> None:
    workers.prepare(SMALL, BUDGET, threading.Event())  # the worker is up
    outcome: list[BaseException] = []
    died = workers.died

    def run() -> None:
        try:
            workers.prepare(SLOW, BUDGET, threading.Event())
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)  # compiling now (SLOW takes seconds)
    pid = _pid(workers)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # what the out-of-memory killer does
    thread.join(30.0)
    assert not thread.is_alive() and isinstance(outcome[0], GrammarWorkerDied), outcome
    assert not isinstance(outcome[0], GrammarRefused) and "SIGKILL" in str(outcome[0]) and "retry" in str(outcome[0])
    assert workers.died == died + 1
    workers.prepare(SMALL, BUDGET, threading.Event())  # a fresh worker takes the next grammar
    assert _pid(workers) not in (None, pid)


def test_killed_multiprocessing_helpers_are_reaped_not_left_zombies(workers: GrammarWorkers) -> None:
    workers.prepare(SMALL, BUDGET, threading.Event())
    tracker = multiprocessing.resource_tracker._resource_tracker._pid
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    assert tracker is not None and server is not None
    for pid in (tracker, server):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _state(tracker) != "Z" or _state(server) != "Z":  # dead, and nobody waited for them yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.warns(UserWarning, match="resource_tracker"):
        workers.prepare(SMALL, BUDGET, threading.Event())  # the worker is alive: no new worker starts
    assert _state(tracker) is None and _state(server) is None  # reaped
    assert multiprocessing.resource_tracker._resource_tracker._pid not in (None, tracker)  # and relaunched


def test_the_fast_lane_has_its_own_worker_and_a_short_budget(workers: GrammarWorkers) -> None:
    prepared = workers.prepare(SMALL, BUDGET, threading.Event(), fast=True)
    assert xgrammar.Grammar.deserialize_json(prepared) is not None
    fast_pid, main_pid = _pid(workers, fast=True), _pid(workers)
    assert fast_pid is not None and fast_pid != main_pid
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, fast_pid) == min(19, base + FAST_WORKER_NICE)
    demoted, timed_out = workers.demoted, workers.timed_out
    with pytest.raises(FastLaneExceeded):  # not a refusal: the caller tries the main lane
        workers.prepare(SLOWER, GrammarLimits(timeout_s=60.0, max_size=10**7), threading.Event(), fast=True)
    assert workers.demoted == demoted + 1 and workers.timed_out == timed_out
    assert _pid(workers, fast=True) is None and not _alive(fast_pid)


def _state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``Z``: a zombie), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
