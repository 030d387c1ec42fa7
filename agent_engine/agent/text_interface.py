"""The text interface of the shell agent (mini-swe-agent style): prompts, action parsing, submission.

Each answer must hold exactly ONE fenced ```bash block; its command runs in the job's sandbox and the
observation reports its exit code and output. These templates are the single source of truth: the
agent loop sends them and ``tiny_agent_model`` trains on transcripts rendered with the same functions.

Invariants: ``parse_actions`` returns every ```bash block's body in order; a command submits exactly
when its output's first line is ``SUBMIT_MARKER`` (or it is ``SUBMIT_COMMAND`` itself). Without a
``repo_map`` the task message is ``TASK_TEMPLATE`` alone, as ``tiny_agent_model`` is trained on it.
"""

from __future__ import annotations

import re

from agent_engine.agent.sandbox import CommandResult
from estimator.tool_parser import parse_shell

__all__ = [
    "CUT_ANSWER_MESSAGE", "OBSERVATION_TEMPLATE", "REPO_MAP_HEADING", "REPO_MAP_TEMPLATE", "SUBMIT_COMMAND",
    "SUBMIT_MARKER", "SYSTEM_PROMPT", "TOOL_COMMANDS", "format_error_message",
    "initial_messages", "is_submission", "observation_message", "parse_actions", "submission_of", "tool_name_of",
]

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"

SYSTEM_PROMPT = (
    "You are an agent that solves tasks in a shell. Reply with exactly one ```bash block holding one "
    f"command. When done, run `{SUBMIT_COMMAND}`."
)
TASK_TEMPLATE = "Task: {task}"
REPO_MAP_HEADING = "The repository's files"
REPO_MAP_TEMPLATE = (REPO_MAP_HEADING + " (read-only ones are the check); each Python module's classes and "
                     "functions at their line numbers:\n{map}")
TOOL_COMMANDS = (
    "Besides shell commands, these run as commands too: `view_file PATH START END` (lines START-END, "
    "numbered), `search PATTERN` (file:line: text of each match), `replace_lines PATH START END 'NEW TEXT'`."
)
OBSERVATION_TEMPLATE = "<returncode>{exit_code}</returncode>\n<output>\n{output}</output>"
FORMAT_ERROR_TEMPLATE = "Format error: reply with EXACTLY ONE ```bash block; found {n}."
CUT_ANSWER_MESSAGE = ("Your answer was cut at the token limit before its ```bash block was closed, so nothing "
                      "was run. Reply with a shorter command.")

_ACTION = re.compile(r"```bash[ \t]*\r?\n(.*?)\r?\n?```", re.S)



def initial_messages(task: str, system_prompt: str = SYSTEM_PROMPT, repo_map: str | None = None) -> list[dict[str, str]]:
    """The system prompt and the task message that open every job (with ``repo_map``: the repository
    map after the task, ``REPO_MAP_TEMPLATE``)."""
    content = TASK_TEMPLATE.format(task=task)
    if repo_map:
        content += "\n\n" + REPO_MAP_TEMPLATE.format(map=repo_map)
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": content}]


def observation_message(result: CommandResult) -> dict[str, str]:
    """The user message reporting a command's result."""
    content = OBSERVATION_TEMPLATE.format(exit_code=result.exit_code, output=result.output)
    return {"role": "user", "content": content}


def format_error_message(n_actions: int) -> dict[str, str]:
    """The user message sent back when an answer holds ``n_actions != 1`` bash blocks."""
    return {"role": "user", "content": FORMAT_ERROR_TEMPLATE.format(n=n_actions)}


def parse_actions(text: str) -> list[str]:
    """The bodies of all fenced ```bash blocks of ``text``, in order."""
    return [m.group(1) for m in _ACTION.finditer(text)]


def is_submission(command: str, output: str) -> bool:
    """True when the command submits: its output's first line is the marker (or it is the echo itself)."""
    lines = output.lstrip().splitlines()
    return (bool(lines) and lines[0].strip() == SUBMIT_MARKER) or command.strip() == SUBMIT_COMMAND


def submission_of(output: str) -> str:
    """What the job submitted: the output after the marker line."""
    lines = output.lstrip().splitlines(keepends=True)
    return "".join(lines[1:])


def tool_name_of(command: str) -> str:
    """The trace name of a command (``bash:<program>``), ``bash`` when no program can be named."""
    call = parse_shell(command)
    return call.name if call is not None else "bash"
