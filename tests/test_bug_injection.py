"""Held-out bugs (``benchmarks.bug_injection``, ``bench injected``): each kind, and the mutants that undo them."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

from agent_engine.agent.mutants import mutants
from benchmarks.bug_injection import KINDS, injections

SOURCE = '''def mean(values, strict=True, places=2):
    """Average of the values that are not None."""
    total = 0
    count = 0
    for v in values:
        if v is None:
            continue
        total += v
        count = count + 1
    if count < 1:
        raise ValueError("empty")
    else:
        result = total / count
    return round(result, places)
'''
INPUTS = ([1, 2, 3], [None, 4], [5, 6], [])
UNDONE_BY_MUTANTS = ("op_change", "flip_comparison", "boundary", "op_swap", "change_const", "invert_if", "shuffle",
                     "wrong_default")


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError


def behaviour(text: str) -> tuple[object, ...] | None:
    """What ``mean`` of ``text`` returns (or raises) on ``INPUTS``; None when it does not load or hangs."""
    namespace: dict[str, object] = {}
    previous = signal.signal(signal.SIGPROF, _alarm)
    try:
        signal.setitimer(signal.ITIMER_PROF, 0.05)  # CPU time: a loaded machine does not cut a sound run
        exec(compile(text, "mean.py", "exec"), namespace)  # noqa: S102 - the test's own source, mutated
        mean = namespace["mean"]
        assert isinstance(mean, Callable)
        return tuple(_outcome(mean, values) for values in INPUTS)
    except TimeoutError:
        return None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _outcome(mean: Callable[..., object], values: list[int | None]) -> object:
    try:
        return mean(values)
    except TimeoutError:
        raise
    except Exception as err:  # noqa: BLE001 - the outcome compared is the error's type
        return type(err)


@pytest.mark.core
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_injects_parsing_text_that_differs(kind: str) -> None:
    found = injections(SOURCE, kind, random.Random(0))
    assert found, kind
    for injection in found:
        assert injection.text != SOURCE and injection.kind == kind and injection.function == "mean"
        compile(injection.text, "mean.py", "exec")


@pytest.mark.core
def test_the_mutants_undo_every_one_edit_bug_on_a_real_function() -> None:
    expected = behaviour(SOURCE)
    bugs = undone = 0
    for seed in range(6):
        for kind in UNDONE_BY_MUTANTS:
            for injection in injections(SOURCE, kind, random.Random(seed))[:1]:
                if behaviour(injection.text) == expected:
                    continue  # an edit that changes nothing here is no bug
                bugs += 1
                undone += any(behaviour(m.text) == expected for m in mutants(injection.text))
    assert bugs > 20 and undone == bugs


@pytest.mark.slow
def test_bench_injected_makes_a_failing_task_and_judges_its_repair(tmp_path: Path) -> None:
    out = tmp_path / "injected"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.injected_repair", "--tasks", "suites", "--only", "exprcalc_left_assoc",
         "--bugs", "1", "--kinds", "shuffle", "--mutants", "20", "--out-dir", str(out),
         "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (out / "tasks.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["name"] == "exprcalc_left_assoc__shuffle_0"
    task = json.loads(lines[0])
    assert "parser.py" not in task["task"] and task["check"] == "python3 check.py"
    fixed, bugged = out / "_fixed" / "exprcalc_left_assoc", Path(task["repo"])
    assert bugged.is_absolute() and bugged.parent == out.resolve()
    changed = [p for p in bugged.rglob("*.py") if p.read_bytes() != (fixed / p.relative_to(bugged)).read_bytes()]
    assert len(changed) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    row = report["rows"][0]
    assert row["kind"] == "shuffle" and row["solved"] is True and 1 <= row["tried"] <= 20  # the data order
    assert report["summary"]["by_kind"]["shuffle"] == {"bugs": 1, "solved": 1}
