"""The worker processes that try each new grammar under a time budget (``engine.grammar_workers``):
a grammar past its budget, or whose request is cancelled, has its worker killed at once, and the next
grammar gets a fresh worker. Budgets here are far below the compile times they cut short, so a busy
machine only makes those compiles longer."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
import xgrammar

from agent_engine.engine.grammar_build import EMPTY, INVALID, TOO_LARGE, TOO_SLOW, GrammarRefused
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.grammar_workers import WORKER_NICE, GrammarCancelled, GrammarWorkers
from scheduler import StructuredSpec

pytestmark = [pytest.mark.core, pytest.mark.timeout(300)]

SMALL = StructuredSpec.json({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
# About 10 s to compile on the embedded model's vocabulary on a quiet 2-core machine (O(n^2) in n).
SLOW = StructuredSpec.json({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1000)}})
BUDGET = GrammarLimits(timeout_s=60.0)


@pytest.fixture(scope="module")
def workers() -> Iterator[GrammarWorkers]:
    info = xgrammar.TokenizerInfo([chr(i) for i in range(32, 127)] + [f"tok{i}" for i in range(4000)])
    pool = GrammarWorkers(info.serialize_json(), processes=1)
    yield pool
    pool.close()


def _pid(workers: GrammarWorkers) -> int | None:
    proc = workers._slots[0].process
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
