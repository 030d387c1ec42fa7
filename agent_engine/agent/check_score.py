"""How well a check ran, read from its exit status and output alone: enough to say an edit made it worse.

Invariants:
- Pure: ``score`` reads only the text and the exit status it is given.
- ``CheckScore.failing`` is the number of failing tests the output states (the judge runner's
  ``N tests: a error, b failed, ...`` line, unittest's ``FAILED (failures=F, errors=E)``, pytest's
  ``F failed, E error``), else the failing tests it names, else its lines that start with ``FAIL``,
  ``FAILED`` or ``ERROR`` (a plain script's report), else None (nothing countable); ``broken`` counts test files that could not be imported, and a run that stopped
  on a traceback before any test result (the code under test does not import) counts as one.
- ``ran_count`` is the number of tests the output says ran (the runner's line, else unittest's), or
  None.
- ``worse_than`` is true only on evidence: a passing check that now fails, more broken test files, or
  more failing tests; a countable run that now has no count at all (it crashed). Equal or fewer
  failures, or two runs with nothing countable, are not worse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_engine.agent.failures import TRACEBACK_START, read_failures

__all__ = ["CheckScore", "ran_count", "score"]

_RUNNER_COUNTS = re.compile(r"^([0-9]+) tests?: (.*)$", re.M)
_RUNNER_BROKEN = re.compile(r"^could not import ", re.M)
_UNITTEST_RAN = re.compile(r"^Ran ([0-9]+) tests?", re.M)
_UNITTEST_FAILED = re.compile(r"^FAILED \(([^)]*)\)", re.M)
_FAIL_LINES = re.compile(r"^(?:FAIL|FAILED|ERROR)\b", re.M)
_PYTEST_TAIL = re.compile(r"([0-9]+) (failed|errors?)\b")
_PYTEST_SUMMARY = re.compile(r"^=+ .*\b(passed|failed|errors?)\b.* in [0-9.]+s.*=+$", re.M)


@dataclass(frozen=True)
class CheckScore:
    """One run of a check: did it pass, how many tests failed (None: not countable), how many test
    files could not be imported."""

    passed: bool
    failing: int | None
    broken: int = 0

    def worse_than(self, before: CheckScore) -> bool:
        """Whether this run is worse than ``before`` (see the module docstring)."""
        if self.passed:
            return False
        if before.passed or self.broken > before.broken:
            return True
        if before.failing is not None and self.failing is None:
            return True
        return before.failing is not None and self.failing is not None and self.failing > before.failing

    @property
    def countable(self) -> bool:
        """Whether the run says how many tests failed or broke (a plain script's check does not)."""
        return self.passed or self.failing is not None or self.broken > 0

    def describe(self) -> str:
        """The run in a few words: ``passes``, ``3 failing tests``, ``1 test file not importable``,
        ``fails`` (nothing countable)."""
        if self.passed:
            return "passes"
        parts = []
        if self.failing is not None:
            parts.append(f"{self.failing} failing test{'s' if self.failing != 1 else ''}")
        if self.broken:
            parts.append(f"{self.broken} test file{'s' if self.broken != 1 else ''} not importable")
        return ", ".join(parts) or "fails"


def score(exit_code: int | None, output: str) -> CheckScore:
    """The score of a check that exited ``exit_code`` printing ``output`` (see the module docstring)."""
    if exit_code == 0:
        return CheckScore(True, 0)
    broken = len(_RUNNER_BROKEN.findall(output))
    failing = _stated_failures(output)
    if failing is None:
        named = read_failures(output).tests
        failing = len(named) if named else None
    if failing is None:
        lines = _FAIL_LINES.findall(output)  # a plain script's ``FAIL what`` lines, one per failure
        failing = len(lines) if lines else None
    if failing is None and not broken and TRACEBACK_START in output:
        broken = 1  # stopped on an error before any test ran
    return CheckScore(False, failing, broken)


def ran_count(output: str) -> int | None:
    """The tests the output says ran (the judge runner's ``N tests:`` line, else unittest's ``Ran N
    tests``, the last one), or None when it says nothing countable."""
    runner = _RUNNER_COUNTS.findall(output)
    if runner:
        return int(runner[-1][0])
    ran = _UNITTEST_RAN.findall(output)
    return int(ran[-1]) if ran else None


def _stated_failures(output: str) -> int | None:
    """The failing tests the output's own summary line states, or None when it has none."""
    runner = _RUNNER_COUNTS.findall(output)
    if runner:
        counts = dict(_count_words(runner[-1][1]))
        return counts.get("failed", 0) + counts.get("error", 0)
    failed = _UNITTEST_FAILED.findall(output)
    if failed:
        counts = dict(_count_words(failed[-1].replace("=", " ")))
        return counts.get("failures", 0) + counts.get("errors", 0)
    if _UNITTEST_RAN.search(output) and re.search(r"^OK\b", output, re.M):
        return 0
    summaries = list(_PYTEST_SUMMARY.finditer(output))
    if summaries:
        return sum(int(n) for n, _ in _PYTEST_TAIL.findall(summaries[-1].group(0)))
    return None


def _count_words(text: str) -> list[tuple[str, int]]:
    """``"3 error, 2 failed"`` or ``"failures 2, errors 1"`` as ``[(word, n)]``."""
    pairs = [(w, int(n)) for n, w in re.findall(r"([0-9]+) ([a-z]+)", text)]
    pairs += [(w, int(n)) for w, n in re.findall(r"([a-z]+) ([0-9]+)", text)]
    return pairs
