"""What the rewrite stage asks the model: one prompt per suspect (the issue, the check's first failure,
the suspect's source and the question: the whole function, a line range, a whole file or one line),
and the follow-up that shows the model its best failed try.

Invariants: every prompt of one suspect starts with the same system message and the same text up to
the suspect's source (the engine caches that prefix, and CONTINUUM pins it between the calls); the
check's output in a prompt is bounded (``CHECK_OUTPUT_CHARS``, ``FOLLOW_UP_OUTPUT_CHARS``), without
unittest's progress dots and with paths relative to the repository.
"""

from __future__ import annotations

import re

from agent_engine.agent.failures import cap_text, failures_line, read_failures, summarize_unittest
from agent_engine.agent.rewrite_answers import Suspect, line_text, shown_source

_PROGRESS = re.compile(r"^[.sFExu]{8,}$", re.M)  # unittest's progress dots
CHECK_OUTPUT_CHARS = 1500  # of the check's output in a rewrite prompt
FOLLOW_UP_OUTPUT_CHARS = 800  # of a failed try's check output in the follow-up round's prompt
FOLLOW_UP_DIFFS = 3  # other failed changes listed there
SYSTEM = "You are an expert Python developer. You fix bugs with the smallest change that makes the tests pass."


def first_failure(output: str, workdir: str, chars: int) -> str:
    """The check's output as a prompt shows it: its first failure in full and the others cut to their
    test and error, without progress dots, paths relative to the repository, at most ``chars``."""
    output = _PROGRESS.sub("", output).replace(workdir.rstrip("/") + "/", "")
    return cap_text(summarize_unittest(output, keep=1), chars).strip()


def suspect_prompt(task: str, output: str, suspect: Suspect, workdir: str,
                   line: int | None = None) -> list[dict[str, str]]:
    """The one prompt all of a suspect's rewrites are sampled from: the issue, the check's failure (its
    progress dots left out, paths relative to the repository), the function; with ``line``, the same up to
    the function, then the question about that line alone (the prompts of one suspect share their prefix)."""
    failing = failures_line(read_failures(output))
    shown = first_failure(output, workdir, CHECK_OUTPUT_CHARS)
    source = shown_source(suspect)
    notes = linter_notes(suspect)
    user = f"A user reported this issue:\n{task.strip()}\n\nThe project's tests fail. {failing}\n{shown}\n\n"
    if suspect.whole_file:
        lang = "python" if suspect.path.endswith(".py") else ""
        user += (f"This file ({suspect.path}, {suspect.last} lines) is on the failing tests' path:\n"
                 f"```{lang}\n{source}\n```\n\nIf the bug is in this file (a wrong value or name, wrong code, or "
                 "something the tests need that is missing), say in one sentence what is wrong, then give the whole "
                 f"file fixed, changing as little as possible, in one ```{lang} block.")
    elif suspect.by_lines:
        user += (f"This function ({suspect.name}, lines {suspect.first}-{suspect.last} of {suspect.path}) runs in "
                 f"the failing tests; each line follows its number in the file:\n```python\n{source}\n```\n\n{notes}")
        user += ("If the bug is in this function, say in one sentence which lines are wrong and why, then write "
                 "`Lines A-B:` with their numbers and, in one ```python block, the new text of those lines only, "
                 "changing as little as possible." if line is None else _line_question(suspect, line))
    else:
        user += (f"This function ({suspect.name}, lines {suspect.first}-{suspect.last} of {suspect.path}) runs in "
                 f"the failing tests (its docstring left out):\n```python\n{source}\n```\n\n{notes}")
        user += ("If the bug is in this function, say in one sentence which line is wrong and why, then give the "
                 "whole function with the bug fixed, changing as little as possible, in one ```python block."
                 if line is None else _line_question(suspect, line))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _line_question(suspect: Suspect, line: int) -> str:
    return (f"The bug is in this line: `{line_text(suspect, line)}`. Say in one sentence what is wrong with it, "
            "then give the line fixed (or a few lines, when one is missing there) in one ```python block.")


def linter_notes(suspect: Suspect) -> str:
    """The paragraph that shows a function's linter notes under its source ("" without notes): the marks a
    lost line leaves (a name nothing assigns, a branch that is only ``pass``), which point a small model
    at code to write back rather than a token to change."""
    if not suspect.notes:
        return ""
    listed = "".join(f"- {text}\n" for _, text in suspect.notes)
    return f"A linter notes in this function (a line may be missing there):\n{listed}\n"


def follow_up_message(verdict: str, output: str, workdir: str, other_diffs: list[str]) -> str:
    """The follow-up round's question: the check's ``verdict`` on the best failed rewrite and its first
    failure, at most ``FOLLOW_UP_DIFFS`` of the other failed changes (as diffs), and the ask."""
    failure = first_failure(output, workdir, FOLLOW_UP_OUTPUT_CHARS)
    tried = "".join(f"\n```diff\n{d}\n```" for d in other_diffs[:FOLLOW_UP_DIFFS] if d)
    return (f"With this rewrite the check still fails ({verdict}):\n{failure}\n\n"
            + (f"These other changes failed too:{tried}\n\n" if tried else "")
            + "Something else is wrong (maybe another line of the function). Say in one sentence what, then "
            "give the whole function fixed in one ```python block.")
