"""The rewrite stage's first phase: the suspects' mutants written and checked, before any model call.

``agent_engine.agent.mutants`` makes the edits; this writes each over its suspect in the job's sandbox
(the ``rewrite`` op), judges it, and undoes it unless it passes. A whole check per mutant is the cost
(the suspects' mutants number in the hundreds, a library's suite takes seconds), so each is first run
against the check's failing tests alone (the ``failing_tests`` op: every other ``unittest`` test
returns unrun): only a mutant under which all of them now pass gets the whole check. The filter is
used only when it reproduces the failure on the unmutated code (the failing tests ran and failed);
a check that runs no ``unittest`` tests gets the whole check for every mutant.

Invariants:
- Everything runs in the sandbox through the tool program or the sandbox's shell; the host reads only
  command output. A mutant's runs are cut at ``MUTANT_CHECK_FACTOR`` times the first check's seconds
  (at least ``MIN_MUTANT_CHECK_SECONDS``): a mutant that never ends costs that, and is undone.
- After ``passes`` returns False the repository reads as before (each mutant written is undone); after
  True the passing mutant stays written. ``record.mutants`` counts the mutants written; the job's
  clock starts at the first (no model call starts it) and ends at the last check.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TypeVar

from agent_engine.agent.aci import run_program
from agent_engine.agent.check_score import CheckScore, score
from agent_engine.agent.failures import read_failures
from agent_engine.agent.job_config import AgentJobRecord
from agent_engine.agent.mutants import Mutant, planned
from agent_engine.agent.rewrite_answers import Suspect, diff_lines
from agent_engine.agent.sandbox import Sandbox

__all__ = ["MIN_MUTANT_CHECK_SECONDS", "MUTANT_CHECK_FACTOR", "PASSED_NOTE", "MutantTrials"]

PASSED_NOTE = "The check passes with mutant"  # how the conversation's note of the passing mutant begins
MUTANT_CHECK_FACTOR = 4  # a mutant's check may run this many times the first check's seconds ...
MIN_MUTANT_CHECK_SECONDS = 10.0  # ... and at least this long (a mutant that loops forever is cut)
T = TypeVar("T")


@dataclass(frozen=True)
class MutantTrials:
    """One job's mutants: its sandbox, check (a shell command), the check's Python arguments (empty when it
    is not a Python command: no filter), record and conversation."""

    sandbox: Sandbox
    check: str
    check_args: list[str]
    record: AgentJobRecord
    messages: list[dict[str, str]]
    t0: float
    executor: Executor | None = None

    async def passes(self, suspects: list[Suspect], output: str, check_seconds: float, limit: int) -> bool:
        """Try at most ``limit`` mutants of ``suspects`` (the first check said ``output`` in
        ``check_seconds``); True when one passes the whole check (it stays written)."""
        plan = planned(suspects, limit)
        if not plan:
            return False
        job = self.record
        job.start_at = job.start_at if job.start_at is not None else time.perf_counter() - self.t0
        timeout = max(MIN_MUTANT_CHECK_SECONDS, MUTANT_CHECK_FACTOR * check_seconds)
        failing = read_failures(output).tests
        before = await self.failing_tests(failing, timeout)
        fixed = {"ran": before["ran"], "failed": 0} if before and before["ran"] and before["failed"] else None
        filtered = 0
        for suspect, mutant in plan:
            if not await self.write(suspect, mutant.text):
                continue
            job.mutants += 1
            if fixed is not None and await self.failing_tests(failing, timeout) != fixed:
                filtered += 1
                await self.undo()
                continue
            now = await self.run_check(timeout)
            job.end_at = time.perf_counter() - self.t0
            if now.passed:
                self.messages.append({"role": "user", "content": _note(suspect, mutant, job.mutants)})
                return True
            await self.undo()
        job.end_at = time.perf_counter() - self.t0
        self.messages.append({"role": "user", "content": f"{job.mutants} mutants of the suspects tried (one-token "
                              f"and one-statement edits; {filtered} failed the failing tests alone): none passed "
                              "the check."})
        return False

    async def in_sandbox(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def write(self, suspect: Suspect, new: str) -> bool:
        return (await self.in_sandbox(run_program, self.sandbox, suspect.rewrite_op(new))).exit_code == 0

    async def undo(self) -> None:
        await self.in_sandbox(run_program, self.sandbox, {"op": "undo"})

    async def run_check(self, timeout: float) -> CheckScore:
        result = await self.in_sandbox(functools.partial(self.sandbox.run, self.check, timeout=timeout))
        return score(result.exit_code, result.output)

    async def failing_tests(self, failing: list[str], timeout: float) -> dict[str, int] | None:
        """``{"ran", "failed"}`` of the failing tests run alone (the ``failing_tests`` op), or None: no
        Python check, no test named, the run cut or its answer unreadable."""
        if not failing or not self.check_args:
            return None
        op = {"op": "failing_tests", "argv": self.check_args, "failing": failing}
        result = await self.in_sandbox(functools.partial(run_program, self.sandbox, op, timeout=timeout))
        lines = result.output.strip().splitlines()
        try:
            got = json.loads(lines[-1]) if lines and not result.timed_out else None
        except ValueError:
            return None
        return got if isinstance(got, dict) and {"ran", "failed"} <= got.keys() else None


def _note(suspect: Suspect, mutant: Mutant, tried: int) -> str:
    """What the conversation says of the mutant that passed: where and what, and its diff."""
    return (f"{PASSED_NOTE} {tried} of the suspects: {suspect.path} {suspect.name}, {mutant.what}.\n"
            f"```diff\n{diff_lines(suspect.text, mutant.text)}\n```")
