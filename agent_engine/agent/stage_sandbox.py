"""The job's sandbox as the repair stage drives it from the event loop: the check, the tool program's ops,
a suspect written and undone.

Invariants:
- Every call runs in ``executor`` (a worker thread; the default executor when None), never on the event
  loop: a check takes seconds.
- ``write`` writes only through the tool program's ``rewrite`` op (lines that still read as the suspect
  shows, a result that compiles, the undo kept); ``undo`` takes back the last write.
- ``check_args`` are the check's Python arguments (``python_check_args``): empty when the check is not a
  ``python3 ...`` command, and then no op that runs the check in-process (the spectrum, the failing
  tests alone) can be used.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import shlex
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TypeVar

from agent_engine.agent.aci import run_program
from agent_engine.agent.check_score import CheckScore, score
from agent_engine.agent.rewrite_answers import Suspect
from agent_engine.agent.sandbox import CommandResult, Sandbox

__all__ = ["StageSandbox", "python_check_args"]

_PYTHON = re.compile(r"^python(?:3(?:\.[0-9]+)?)?$")
T = TypeVar("T")


def python_check_args(check: str) -> list[str]:
    """The arguments after the interpreter of a ``python3 ...`` check command; [] for any other command
    (its spectrum cannot be taken: the static failing path alone ranks the suspects)."""
    try:
        argv = shlex.split(check)
    except ValueError:
        return []
    return argv[1:] if argv and _PYTHON.match(argv[0].rsplit("/", 1)[-1]) else []


@dataclass(frozen=True)
class StageSandbox:
    """One job's sandbox, its check (a shell command) and the executor its calls run in."""

    sandbox: Sandbox
    check: str
    executor: Executor | None = None

    @property
    def check_args(self) -> list[str]:
        return python_check_args(self.check)

    @property
    def command_timeout(self) -> float:
        return self.sandbox.timeout

    @property
    def workdir(self) -> str:
        return str(self.sandbox.workdir)

    async def call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    async def op(self, op: dict[str, object], max_output_chars: int | None = None,
                 timeout: float | None = None) -> CommandResult:
        """One op of the tool program (``agent_engine.agent.aci.run_program``)."""
        return await self.call(functools.partial(run_program, self.sandbox, op, max_output_chars, timeout))

    async def op_answer(self, op: dict[str, object], max_output_chars: int | None = None,
                        timeout: float | None = None) -> object:
        """The JSON an op prints on its last line; None when it was cut or printed nothing readable."""
        result = await self.op(op, max_output_chars, timeout)
        lines = result.output.strip().splitlines()
        if not lines or result.timed_out:
            return None
        try:
            return json.loads(lines[-1])
        except ValueError:
            return None

    async def run_check(self, timeout: float | None = None) -> tuple[CheckScore, str]:
        """The check's score and output (cut at ``timeout`` when given, shorter than the sandbox's)."""
        result = await self.call(functools.partial(self.sandbox.run, self.check, timeout=timeout))
        return score(result.exit_code, result.output), result.output

    async def write(self, suspect: Suspect, new: str) -> bool:
        """Write ``new`` over ``suspect`` (the ``rewrite`` op); False when it was refused."""
        return (await self.op(suspect.rewrite_op(new))).exit_code == 0

    async def undo(self) -> None:
        """Take back the last write (the ``undo`` op)."""
        await self.op({"op": "undo"})
