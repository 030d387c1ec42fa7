"""The rewrite stage's first phase: the suspects' mutants written and checked, before any model call.

``agent_engine.agent.mutants`` makes the edits; this writes each over its suspect in the job's sandbox,
judges it, and undoes it unless it passes. A whole check per mutant is the cost (the suspects' mutants
number in the hundreds, a library's suite takes seconds), so each is first screened against the
check's failing tests alone (every other ``unittest`` test returns unrun): only a mutant under which
all of them now pass gets the whole check. The screen runs many mutants in one op
(``screen_mutants``, ``agent_engine.agent.mutant_screen``: a forked child per mutant, no interpreter
started for each) and is used only when it reproduces the failure on the unmutated code (the
``failing_tests`` op: the failing tests ran and failed); otherwise each mutant is written (the
``rewrite`` op) and gets the whole check.

Invariants:
- Everything runs in the sandbox through the tool program or the sandbox's shell; the host reads only
  command output. A mutant's whole check is cut at ``MUTANT_CHECK_FACTOR`` times the first check's
  seconds (at least ``MIN_MUTANT_CHECK_SECONDS``), its screen at that factor times the failing tests'
  first run alone (at least ``MIN_SCREEN_SECONDS``), a screening op at ``SCREEN_SHARE`` of the
  sandbox's command timeout: a mutant that never ends costs that, and is undone.
- After ``passes`` returns False the repository reads as before (each mutant written is undone; an op
  cut from outside is followed by an ``undo``); after True the passing mutant stays written.
- A screening op's command fits ``aci.MAX_COMMAND_CHARS`` (Linux caps the shell's one argument at 128
  KiB): a batch is cut to fit; a mutant too long for any op is skipped; a failing-test list too long
  to leave room for mutants means no screen (each mutant gets the whole check).
  ``record.mutants`` counts the mutants tried; the job's clock starts at the first (no model call
  starts it) and ends at the last check.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from agent_engine.agent.aci import MAX_COMMAND_CHARS, program_command_chars
from agent_engine.agent.failures import read_failures
from agent_engine.agent.job_config import AgentJobRecord
from agent_engine.agent.mutants import Mutant, planned
from agent_engine.agent.rewrite_answers import Suspect, diff_lines
from agent_engine.agent.stage_sandbox import StageSandbox

__all__ = ["MIN_MUTANT_CHECK_SECONDS", "MUTANT_CHECK_FACTOR", "PASSED_NOTE", "MutantTrials"]

PASSED_NOTE = "The check passes with mutant"  # how the conversation's note of the passing mutant begins
MUTANT_CHECK_FACTOR = 4  # a mutant's check may run this many times the first check's seconds ...
MIN_MUTANT_CHECK_SECONDS = 10.0  # ... and at least this long (a mutant that loops forever is cut)
MIN_SCREEN_SECONDS = 3.0  # a mutant's failing tests alone may run at least this long (else 4x their first run)
SCREEN_SHARE = 0.75  # of the sandbox's command timeout, one screening op may use


@dataclass(frozen=True)
class MutantTrials:
    """One job's mutants: its sandbox and check, record and conversation (``t0``: the run's clock start)."""

    box: StageSandbox
    record: AgentJobRecord
    messages: list[dict[str, str]]
    t0: float

    async def passes(self, suspects: list[Suspect], output: str, check_seconds: float, limit: int,
                     leading: int | None = None) -> bool:
        """Try at most ``limit`` mutants of ``suspects`` (the first check said ``output`` in
        ``check_seconds``; ``leading``: see ``planned``); True when one passes the whole check (it stays
        written)."""
        plan = planned(suspects, limit, leading)
        if not plan:
            return False
        job = self.record
        job.start_at = job.start_at if job.start_at is not None else time.perf_counter() - self.t0
        timeout = max(MIN_MUTANT_CHECK_SECONDS, MUTANT_CHECK_FACTOR * check_seconds)
        failing = read_failures(output).tests
        started = time.perf_counter()
        before = await self.failing_tests(failing, timeout)
        screen_seconds = min(timeout, max(MIN_SCREEN_SECONDS, MUTANT_CHECK_FACTOR * (time.perf_counter() - started)))
        screenable = program_command_chars(self.screen_op([], failing, 0, 0.0)) < MAX_COMMAND_CHARS // 2
        if before is not None and before["ran"] and before["failed"] and screenable:
            passing, filtered = await self.screened(plan, failing, before["ran"], screen_seconds, timeout)
        else:
            passing, filtered = await self.each_checked(plan, timeout), 0
        job.end_at = time.perf_counter() - self.t0
        if passing is not None:
            self.messages.append({"role": "user", "content": _note(*passing, job.mutants)})
            return True
        self.messages.append({"role": "user", "content": f"{job.mutants} mutants of the suspects tried (one-token "
                              f"and one-statement edits; {filtered} failed the failing tests alone): none passed "
                              "the check."})
        return False

    async def screened(self, plan: list[tuple[Suspect, Mutant]], failing: list[str], ran: int, screen_seconds: float,
                       timeout: float) -> tuple[tuple[Suspect, Mutant] | None, int]:
        """The plan's mutants screened in batches (the ``screen_mutants`` op: the failing tests alone, in
        a child per mutant, each cut at ``screen_seconds``), each that passes the screen then checked
        whole (cut at ``timeout``): ``(the passing mutant or None, how many failed the screen)``."""
        job, filtered, pending = self.record, 0, plan
        while pending:
            batch = self.batch(pending, failing)
            if not batch:  # one edit too long for a command line: skipped
                job.mutants, pending = job.mutants + 1, pending[1:]
                continue
            outcome = await self.screen(batch, failing, ran, screen_seconds)
            if outcome is None:  # the op was cut or said nothing readable: take back what it may have left
                await self.box.undo()
                outcome = {"passed": None, "tried": 1, "failed_filter": 1}
            tried, passed = max(1, outcome["tried"] or 0), outcome["passed"]
            filtered += outcome["failed_filter"] or 0
            job.mutants += tried if passed is None else passed + 1
            if passed is None:
                pending = pending[tried:]
                continue
            if (await self.box.run_check(timeout))[0].passed:
                return batch[passed], filtered
            await self.box.undo()
            pending = pending[passed + 1:]
        return None, filtered

    async def each_checked(self, plan: list[tuple[Suspect, Mutant]], timeout: float) -> tuple[Suspect, Mutant] | None:
        """Each mutant written and checked whole (no failing tests to screen with): the passing one, or None."""
        for suspect, mutant in plan:
            self.record.mutants += 1
            if not await self.box.write(suspect, mutant.text):
                continue
            if (await self.box.run_check(timeout))[0].passed:
                return suspect, mutant
            await self.box.undo()
        return None

    async def screen(self, batch: list[tuple[Suspect, Mutant]], failing: list[str], ran: int,
                     seconds: float) -> dict[str, int | None] | None:
        """One ``screen_mutants`` op over ``batch``: its outcome, or None when it was cut or unreadable.
        It may run for ``SCREEN_SHARE`` of the sandbox's command timeout, each mutant at most ``seconds``."""
        got = await self.box.op_answer(self.screen_op(batch, failing, ran, seconds))
        if not isinstance(got, dict) or not {"passed", "tried", "failed_filter"} <= got.keys():
            return None
        passed = got["passed"]
        fits = passed is None or isinstance(passed, int) and 0 <= passed < len(batch)
        return got if fits and isinstance(got["tried"], int) and isinstance(got["failed_filter"], int) else None

    def screen_op(self, batch: list[tuple[Suspect, Mutant]], failing: list[str], ran: int,
                  seconds: float) -> dict[str, object]:
        budget = SCREEN_SHARE * self.box.command_timeout
        return {"op": "screen_mutants", "argv": self.box.check_args, "failing": failing, "ran": ran,
                "edits": [s.rewrite_op(m.text) for s, m in batch], "seconds": min(seconds, budget), "budget": budget}

    def batch(self, pending: list[tuple[Suspect, Mutant]], failing: list[str]) -> list[tuple[Suspect, Mutant]]:
        """The first pending mutants whose op's command fits ``MAX_COMMAND_CHARS`` (each edit counted at
        ``_encoded_chars``, never less than it adds); empty when not even the first one fits."""
        room = MAX_COMMAND_CHARS - program_command_chars(self.screen_op([], failing, 0, 0.0))
        n = 0
        for suspect, mutant in pending:
            room -= _encoded_chars(suspect.rewrite_op(mutant.text))
            if room <= 0:
                break
            n += 1
        return pending[:n]

    async def failing_tests(self, failing: list[str], timeout: float) -> dict[str, int] | None:
        """``{"ran", "failed"}`` of the failing tests run alone (the ``failing_tests`` op), or None: no
        Python check, no test named, the run cut or its answer unreadable."""
        if not failing or not self.box.check_args:
            return None
        op = {"op": "failing_tests", "argv": self.box.check_args, "failing": failing}
        got = await self.box.op_answer(op, timeout=timeout)
        return got if isinstance(got, dict) and {"ran", "failed"} <= got.keys() else None


def _encoded_chars(edit: dict[str, object]) -> int:
    """At least what one edit adds to the op's command: its JSON and a separator, a third longer in base64,
    and the padding base64 may add."""
    return (len(json.dumps(edit)) + 2) * 4 // 3 + 4


def _note(suspect: Suspect, mutant: Mutant, tried: int) -> str:
    """What the conversation says of the mutant that passed: where and what, and its diff."""
    return (f"{PASSED_NOTE} {tried} of the suspects: {suspect.path} {suspect.name}, {mutant.what}.\n"
            f"```diff\n{diff_lines(suspect.text, mutant.text)}\n```")
