"""What a command's output says failed, read on the host from the text alone, and long outputs made short.

A check's output names the failing tests and, in its tracebacks, the files and lines the failures
went through; ``read_failures`` extracts both, so the agent can append the failing tests' names and
the library code on the failing path (``agent_engine.agent.repo_tool``, run in the sandbox with the
frames) to the observation. ``summarize_unittest`` and ``cap_text`` keep a verbose output short, since
every prompt token costs time on a CPU and a small model's window is a few thousand tokens.

Invariants:
- Pure: these functions read only the text they are given (no file, no process).
- ``read_failures`` keeps at most ``MAX_TRACEBACKS`` tracebacks of at most ``MAX_FRAMES`` frames each
  (the innermost ones), as ``(path, line)`` in the order Python prints them (outermost first); tests
  are listed once each, in order of appearance (unittest's ``FAIL:``/``ERROR:`` lines, pytest's
  ``FAILED``/``ERROR`` lines).
- ``summarize_unittest`` changes only an output of more than ``keep`` unittest failure blocks and at
  least ``SUMMARY_MIN_CHARS`` characters: the first ``keep`` blocks stay whole, each other one becomes
  its header line and its error line (the
  first unindented line after its traceback), and the run's closing lines stay; it says so.
- ``cap_text`` returns text of at most ``max_chars`` characters (plus its note): the head and the tail
  around a note saying how many characters were left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Failures", "cap_text", "failures_line", "read_failures", "summarize_unittest"]

TRACEBACK_START = "Traceback (most recent call last):"
MAX_TRACEBACKS = 20
MAX_FRAMES = 30
TESTS_LISTED = 4  # failing tests named, at most
SUMMARY_MIN_CHARS = 1500
ERROR_CHARS = 200  # characters of a summarized failure's error line
_FRAME = re.compile(r'^\s*File "([^"]+)", line ([0-9]+)')
_PYTEST_FRAME = re.compile(r"^([^\s:\"']+\.py):([0-9]+): ")
_UNITTEST_FAILURE = re.compile(r"^(?:FAIL|ERROR): (\S+)(?: \(([^)]*)\))?", re.M)
_PYTEST_FAILURE = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)", re.M)
_SEPARATOR = re.compile(r"^={20,}$", re.M)
_CLOSING = re.compile(r"^-{20,}\nRan [0-9]+ tests?", re.M)


@dataclass(frozen=True)
class Failures:
    """The failing tests a command's output names and its tracebacks' frames."""

    tests: list[str] = field(default_factory=list)
    tracebacks: list[list[tuple[str, int]]] = field(default_factory=list)


def read_failures(output: str) -> Failures:
    """The failing tests and tracebacks of ``output`` (see the module docstring)."""
    tests: list[str] = []
    for m in _UNITTEST_FAILURE.finditer(output):
        name, where = m.group(1), m.group(2)
        test = where if where and where.endswith("." + name) else f"{where}.{name}" if where else name
        if test not in tests:
            tests.append(test)
    for m in _PYTEST_FAILURE.finditer(output):
        test = m.group(1).rstrip(":")  # the judge runner's ``FAILED id: message`` lines
        if test not in tests:
            tests.append(test)
    tracebacks: list[list[tuple[str, int]]] = []
    for block in output.split(TRACEBACK_START)[1:]:
        frames: list[tuple[str, int]] = []
        for line in block.splitlines()[1:]:
            m = _FRAME.match(line)
            if m is not None:
                frames.append((m.group(1), int(m.group(2))))
            elif line and not line[0].isspace():  # the exception line ends the traceback
                break
        if frames:
            tracebacks.append(frames[-MAX_FRAMES:])
    if not tracebacks:  # pytest's own format: ``path.py:LINE: in func`` / ``path.py:LINE: Error``
        frames = [(m.group(1), int(m.group(2))) for m in map(_PYTEST_FRAME.match, output.splitlines()) if m]
        if frames:
            tracebacks.append(frames[-MAX_FRAMES:])
    return Failures(tests, tracebacks[:MAX_TRACEBACKS])


def failures_line(failures: Failures) -> str:
    """One line naming the failing tests ("" when none)."""
    tests = failures.tests
    if not tests:
        return ""
    more = f", and {len(tests) - TESTS_LISTED} more" if len(tests) > TESTS_LISTED else ""
    return f"Failing tests ({len(tests)}): {', '.join(tests[:TESTS_LISTED])}{more}."


def summarize_unittest(output: str, keep: int = 2) -> str:
    """``output`` with unittest failure blocks past the first ``keep`` cut to two lines each (see the
    module docstring)."""
    if len(output) < SUMMARY_MIN_CHARS:
        return output
    closing = list(_CLOSING.finditer(output))
    body, tail = (output[:closing[-1].start()], output[closing[-1].start():]) if closing else (output, "")
    parts = _SEPARATOR.split(body)
    head, blocks = parts[0], parts[1:]
    failures = [b for b in blocks if b.lstrip("\n").startswith(("FAIL:", "ERROR:"))]
    if len(failures) <= keep or len(failures) != len(blocks):
        return output
    short = []
    for block in blocks[keep:]:
        lines = [x for x in block.strip("\n").splitlines() if x.strip()]
        after = lines[next((i for i, x in enumerate(lines) if x.startswith(TRACEBACK_START)), 0) + 1:]
        error = next((x for x in after if not x[0].isspace() and not x.startswith("-")), lines[-1] if after else "")
        error = error.strip()
        error = error if len(error) <= ERROR_CHARS else error[:ERROR_CHARS - 3] + "..."
        short.append(f"{lines[0]}\n    {error}" if error else lines[0])
    line = "=" * 70
    kept = "".join(f"{line}{b}" for b in blocks[:keep])
    return (f"{head}{kept}{line}\n[{len(blocks) - keep} more failures, each cut to its test and its "
            "error:]\n" + "\n".join(short) + "\n" + tail)


def cap_text(text: str, max_chars: int) -> str:
    """``text`` cut to its head and tail around a note when it is longer than ``max_chars``."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[... {left_out} characters of output left out ...]\n{text[-tail:] if tail else ''}"
