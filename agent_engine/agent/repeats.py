"""Repeated calls: a call the model already made is flagged, and the next answer is sampled hotter.

A small model decoding greedily from an almost identical context tends to send the same call again,
and again: the same failing ``edit_file`` six to twelve times in a row, the same command that exits 127
for a whole job. ``RepeatGuard`` notices such a call, gives the loop a note for the observation (that
the call repeats, and what happened the time before), and raises the temperature of the next model
call, seeded, so the next answer leaves the greedy path reproducibly.

Invariants:
- A call's key is what the model asked for, exactly: the tool and its arguments as JSON with sorted
  keys (tool interface), the command (text interface), or the whole answer when it held no valid call.
- A call repeats when its key equals the previous call's (whatever that call wrote: a loop such as
  ``cmd > out.txt && cat out.txt`` rewrites its own file), or that of a call that failed among the
  last ``Escalation.window`` calls AND found the repository as this one does (``agent_engine.agent.tree_state``: every
  path's kind, mode, size and content), so that it must fail the same way: running the check again
  after an edit, or viewing a file again later, is normal work and never a repeat.
  ``Repeat.calls_ago`` points at the most recent such call.
- ``streak`` counts the consecutive repeats just made; the first call that is not a repeat resets it
  to 0. The next call's temperature is ``Escalation.temperature(base, streak)``: ``base`` at streak 0,
  else ``min(cap, base + step * streak)`` but never below ``base`` (bounded, monotone in the streak).
- The seed of the call at index ``step`` of a job is ``seed + step``, sent whenever that call's
  temperature is above 0 (None otherwise): given the seed, a job's calls and samples are
  reproducible on a server that honours per-request seeds, and two calls never share a seed.
- The guard never changes what a tool does: it only reads outcomes and chooses sampling parameters.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agent_engine.agent.tree_state import tree_state

__all__ = ["Escalation", "Repeat", "RepeatGuard", "call_key", "gist", "tree_state"]

GIST_CHARS = 200


@dataclass(frozen=True)
class Escalation:
    """How far a repeat raises the next call's temperature: ``step`` per consecutive repeat, up to
    ``cap``; ``window`` recent calls are remembered for "repeats a failing call"."""

    step: float = 0.4
    cap: float = 1.2
    window: int = 8

    def __post_init__(self) -> None:
        if self.step < 0 or self.cap < 0:
            raise ValueError(f"repeat temperature step and cap must be >= 0, got {self.step}, {self.cap}")
        if self.window < 1:
            raise ValueError(f"repeat window must be >= 1, got {self.window}")

    def temperature(self, base: float, streak: int) -> float:
        """The temperature after ``streak`` consecutive repeats (``base`` when there are none)."""
        if streak <= 0:
            return base
        return max(base, min(self.cap, base + self.step * streak))


@dataclass(frozen=True)
class Repeat:
    """A call that repeats an earlier one: how many calls ago, and how that one ended."""

    calls_ago: int
    failed: bool
    exit_code: int | None
    gist: str

    def note(self) -> str:
        """The line the observation carries: the call repeats, what happened last time, what to do."""
        when = "just before" if self.calls_ago == 1 else f"{self.calls_ago} calls ago"
        if not self.failed:
            return (f"Repeated call: you made this exact call (same tool and arguments) {when}, and it "
                    "succeeded then. Making it again does not move the task on: take the next step instead.")
        code = f"exit code {self.exit_code}" if self.exit_code is not None else "an error"
        said = f": {self.gist}" if self.gist else ""
        return (f"Repeated call: you made this exact call (same tool and arguments) {when}, and it failed "
                f"then ({code}{said}). The same call gives the same result: change it.")


def call_key(tool: str | None, arguments: Any) -> str:
    """The identity of one call: its tool and its arguments (JSON, sorted keys)."""
    return json.dumps([tool, arguments], sort_keys=True, default=str)


def gist(output: str, limit: int = GIST_CHARS) -> str:
    """What an observation said, in one bounded line: its first meaningful line and, when different, its
    last (an error's message usually ends a traceback); an ``exit code N`` line is skipped."""
    lines = [x.strip() for x in output.splitlines() if x.strip()]
    if lines and lines[0].startswith("exit code "):
        lines = lines[1:]
    if not lines:
        return ""
    text = lines[0] if len(lines) == 1 or lines[-1] == lines[0] else f"{lines[0]} ... {lines[-1]}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Call:
    key: str
    state: str  # the repository's tree_state when the call ran
    failed: bool
    exit_code: int | None
    gist: str


@dataclass
class RepeatGuard:
    """The calls of one job, read for repeats; chooses each call's temperature and seed (see the module
    docstring)."""

    base_temperature: float = 0.0
    seed: int = 0
    escalation: Escalation = field(default_factory=Escalation)
    state: str = ""  # the repository's tree_state now (before the next call)
    streak: int = 0
    _recent: deque[_Call] = field(default_factory=deque, init=False, repr=False)

    def sampling(self, step: int) -> tuple[float, int | None]:
        """``(temperature, seed)`` of the call with index ``step``; seed None when it is greedy."""
        temperature = self.escalation.temperature(self.base_temperature, self.streak)
        return temperature, (self.seed + step if temperature > 0 else None)

    def record(self, key: str, failed: bool, exit_code: int | None, output: str, state_after: str) -> Repeat | None:
        """Remember one call (run on ``self.state``), how it ended and the repository's state after it;
        returns the ``Repeat`` it makes, or None for a new call."""
        repeat = self._find(key)
        self.streak = self.streak + 1 if repeat is not None else 0
        self._recent.appendleft(_Call(key, self.state, failed, exit_code, gist(output)))
        self.state = state_after
        while len(self._recent) > self.escalation.window:
            self._recent.pop()
        return repeat

    def _find(self, key: str) -> Repeat | None:
        for ago, call in enumerate(self._recent, 1):
            if call.key == key and (ago == 1 or (call.failed and call.state == self.state)):
                return Repeat(ago, call.failed, call.exit_code, call.gist)
        return None
