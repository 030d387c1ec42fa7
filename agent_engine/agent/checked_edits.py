"""Edits checked by the task's own check: an edit that makes it worse is undone, one that makes it pass ends the job.

A small model's edit often breaks more than it fixes: it replaces three lines by one and drops a
``return``, or rewrites the wrong function, and then builds on the broken file for the rest of the
job. Every harness that knows the task's check can run it after each edit (SWE-agent refuses an edit
that breaks the syntax; this goes one step further, to the tests), and the model then sees, in the
same observation as its edit, what the edit did to the check. The job's opening also runs the check
once, so the task message already shows what fails and the code on the failing path.

Invariants:
- Only with a check command (the task's) and the tool interface's aids; every run of the check goes
  through the job's ``Sandbox`` like any command, and the edit's undo is the tool program's ``undo``
  op (``agent_engine.agent.edit_undo``), also in the sandbox: nothing here touches the repository.
- ``CheckedEdits.baseline`` is the score of the last run of the check the job saw (the opening run,
  a run the model made with bash, or the run after an edit that was kept).
- After an edit that wrote a file, the check runs. Worse than the baseline
  (``agent_engine.agent.check_score.CheckScore.worse_than``): the edit is undone, the observation says
  so with both scores and the tests failing with the edit, and the outcome is failed (exit
  code 1) so the repeat guard counts a repeat of it. Otherwise the edit stays, the baseline moves, and
  the observation carries the check's result (annotated as a failing command's); ``passed`` when the
  check now passes.
- A submit while the last run of the check failed is refused with the reason, at most
  ``SUBMIT_REFUSALS`` times a job (a model that cannot fix it may still end the job).
- Observations stay within ``output_chars`` for the check's output (its annotation apart), as any
  command's; after an edit, within ``AFTER_EDIT_CHARS`` for each (the model sees the check after every
  edit, and each observation costs prompt time).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agent_engine.agent.aci import ToolOutcome, annotate, run_program
from agent_engine.agent.check_score import CheckScore, score
from agent_engine.agent.failures import failures_line, read_failures
from agent_engine.agent.sandbox import Sandbox

__all__ = ["OPENING_HEADING", "CheckedEdits", "EditResult"]

OPENING_HEADING = "The check's output now"
AFTER_EDIT_CHARS = 1500  # of the check's output after a kept edit, and of its code on the failing path
OPENING_NEXT = ("Next: find the wrong line in the code above (view_file or search for more), then fix it with "
                "replace_lines or edit_file; each edit runs the check.")
OPENING_NEXT_SEARCH = ("Next: search for the names the task and the failing tests use, view_file the code they "
                       "lead to, then fix it with replace_lines or edit_file; each edit runs the check.")
SUBMIT_REFUSALS = 2  # submits refused while the check fails, per job; the next one goes through


@dataclass(frozen=True)
class EditResult:
    """An edit's outcome with the check's verdict in its observation; ``passed``: the check passes."""

    outcome: ToolOutcome
    passed: bool = False
    undone: bool = False


@dataclass
class CheckedEdits:
    """The task's check, run at the opening and after each edit (see the module docstring)."""

    check: str
    baseline: CheckScore | None = None
    submits_refused: int = 0

    def refuse_submit(self, outcome: ToolOutcome) -> ToolOutcome | None:
        """A submit while the check fails, refused (at most ``SUBMIT_REFUSALS`` times a job): the outcome
        to show instead, or None to let it through."""
        if self.baseline is None or self.baseline.passed or self.submits_refused >= SUBMIT_REFUSALS:
            return None
        self.submits_refused += 1
        counts = f" ({self.baseline.describe()})" if self.baseline.countable else ""
        text = (f"Not submitted: the check still fails{counts}. Fix the library code until the check passes; an "
                "edit that makes it pass ends the task.")
        return replace(outcome, observation=text, submitted=False, exit_code=1)

    def opening(self, sandbox: Sandbox, output_chars: int | None) -> str:
        """The check run once before the first model call: a section for the task message."""
        result = sandbox.run(self.check)
        self.baseline = score(result.exit_code, result.output)
        if result.exit_code == 0:
            return f"{OPENING_HEADING} (`{self.check}`): it passes already (exit code 0)."
        annotated = annotate(sandbox, result.output, output_chars)
        advice = OPENING_NEXT if annotated.code_files else OPENING_NEXT_SEARCH
        return (f"{OPENING_HEADING} (`{self.check}`, exit code {result.exit_code}):\n"
                f"{annotated.text.rstrip()}\n\n{advice}")

    def saw_run(self, exit_code: int | None, output: str) -> None:
        """The model ran the check itself: its score is the new baseline."""
        self.baseline = score(exit_code, output)

    def is_check(self, command: str) -> bool:
        """Whether a shell command is the task's check (as typed, blanks aside)."""
        return command.split() == self.check.split()

    def after_edit(self, sandbox: Sandbox, outcome: ToolOutcome, output_chars: int | None) -> EditResult:
        """Run the check after ``outcome`` (an edit that wrote a file); keep or undo it (see the module
        docstring)."""
        result = sandbox.run(self.check)
        now, before = score(result.exit_code, result.output), self.baseline
        if before is not None and now.worse_than(before):
            undo = run_program(sandbox, {"op": "undo"})
            failing = failures_line(read_failures(result.output))
            text = (f"{outcome.observation}\n\nThe check got worse with this edit ({before.describe()} before, "
                    f"{now.describe()} with it), so the edit was undone: {undo.output.strip()}"
                    f"{' With it: ' + failing if failing else ''}\n"
                    "Make a smaller edit that changes only the wrong code.")
            return EditResult(replace(outcome, observation=text, exit_code=1), undone=True)
        self.baseline = now
        if now.passed:
            text = f"{outcome.observation}\n\nThe check passes with this edit (`{self.check}`, exit code 0)."
            return EditResult(replace(outcome, observation=text), passed=True)
        chars = AFTER_EDIT_CHARS if output_chars is None else min(output_chars, AFTER_EDIT_CHARS)
        annotated = annotate(sandbox, result.output, chars)
        shown = annotated.text.rstrip()
        was = f"; {before.describe()} before" if before is not None and before.countable else ""
        counts = f" ({now.describe()}{was})" if now.countable else ""
        text = (f"{outcome.observation}\n\nThe check after this edit (`{self.check}`) still fails: exit code "
                f"{result.exit_code}{counts}:\n{shown}")
        return EditResult(replace(outcome, observation=text, code_files=annotated.code_files))
