"""The tool-calling agent's computer interface: four tools a small model can drive.

``bash(command)`` runs a shell command; ``view_file(path)`` shows a file with line numbers (a folder:
its files); ``edit_file(path, old_text, new_text)`` replaces one exact piece of a file and answers with
the edited lines in context; ``submit()`` ends the job. As in SWE-agent's interface, every observation
says what happened and what changed, and a failed edit says why and that nothing changed.

Invariants:
- Every tool runs inside the job's ``Sandbox``: view and edit are a short ``python3 -I`` program
  (``agent_engine.agent.file_tool``'s source) given its arguments as base64 JSON, so the sandbox's
  confinement (its folder, limits, no network) covers them exactly as it covers ``bash``; nothing here
  touches the host's files. Isolated mode keeps the repository off its import path: a repository's
  ``json.py`` or ``base64.py`` never shadows the program's own modules.
- ``edit_file`` changes the file only when ``old_text`` occurs exactly once, either verbatim or, failing
  that, line by line with leading and trailing blanks ignored (then ``new_text`` is re-indented to the
  first matched line's indentation); otherwise the file is unchanged and the observation says so, and
  shows what the model probably meant (``agent_engine.agent.file_tool``: the occurrences' line numbers,
  the lines equal but for whitespace, or the closest lines by ``difflib``, bounded).
- ``run_tool_call`` never raises for a bad call: an unknown tool, arguments that are not a JSON object
  or a missing argument give ``ToolOutcome.format_error`` with an observation naming the problem.
- A ``bash`` command whose words are another tool and exactly its arguments (``view_file calc.py``)
  runs that tool: small models often type the tools as shell commands.
- ``edit_file`` also takes ``old_text`` copied from ``view_file`` with its line numbers (``  4| ``): when
  every line carries one and the text is not found as given, the numbers are dropped and it is tried
  again.
- ``Progress.advice`` only adds a line after the observation, read from what the job did (viewed,
  edited, a repeated call, the check's exit code); it never changes what a tool did.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_engine.agent.sandbox import Sandbox

__all__ = ["SYSTEM_PROMPT_TOOLS", "TOOLS", "Progress", "ToolOutcome", "parse_arguments", "run_tool_call"]

SYSTEM_PROMPT_TOOLS = (
    "You are a careful software engineer fixing a bug in a small Python repository. Call exactly one tool "
    "per reply. Work in this order:\n"
    "1. view_file the files the task names (view_file \".\" lists the files).\n"
    "2. Run the check with bash to see how it fails.\n"
    "3. Fix the bug with edit_file: old_text is the exact wrong code, new_text the corrected code.\n"
    "4. Run the check again. If it still fails, read its output and fix again.\n"
    "5. When the check passes, call submit."
)


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description, "strict": True,
        "parameters": {"type": "object", "properties": properties, "required": list(properties),
                       "additionalProperties": False}}}


_STRING = {"type": "string"}
TOOLS: list[dict[str, Any]] = [
    _function("bash", "Run one shell command in the repository and see its exit code and output.",
              {"command": _STRING}),
    _function("view_file", "Show a file with line numbers (a folder: the files in it).", {"path": _STRING}),
    _function("edit_file", "Replace the exact text old_text in a file by new_text.",
              {"path": _STRING, "old_text": _STRING, "new_text": _STRING}),
    _function("submit", "Finish: the bug is fixed and the check passes.", {}),
]
_REQUIRED = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}

# Runs inside the sandbox (``python3 -I -c SOURCE ARG``): the view and edit program, stdlib only.
_FILE_PROGRAM = (Path(__file__).resolve().parent / "file_tool.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call did: the observation sent back, the command as the trace names it, and flags."""

    observation: str
    command: str
    tool_name: str
    exit_code: int | None = None
    timed_out: bool = False
    submitted: bool = False
    format_error: bool = False


def run_tool_call(sandbox: Sandbox, call: dict[str, Any]) -> ToolOutcome:
    """Run one OpenAI-style tool call (``{"function": {"name", "arguments"}}``) in ``sandbox``."""
    function = call.get("function") or {}
    name, args = function.get("name"), parse_arguments(function.get("arguments"))
    if name not in _REQUIRED:
        return _format_error(f"There is no tool {name!r}. Call one of: {', '.join(_REQUIRED)}.")
    if args is None:
        return _format_error(f"The arguments of {name} must be a JSON object.")
    missing = [k for k in _REQUIRED[name] if not isinstance(args.get(k), str)]
    if missing:
        return _format_error(f"{name} needs the string argument(s) {', '.join(missing)}.")
    if name == "bash":
        name, args = _as_tool_command(args)
    if name == "submit":
        return ToolOutcome("Submitted.", "submit", "submit", submitted=True)
    if name == "bash":
        command = args["command"]
        tool = "bash"
    else:
        command = _file_command(name, args)
        tool = name
    result = sandbox.run(command)
    observation = result.output if name != "bash" else f"exit code {result.exit_code}\n{result.output}"
    shown = args["command"] if name == "bash" else f"{name} {args['path']}"
    return ToolOutcome(observation.rstrip("\n") or "(no output)", shown, tool, result.exit_code, result.timed_out)


@dataclass
class Progress:
    """What a job has done so far, read for the one line of advice after each observation (after
    SWE-agent's interface: a small model that repeats itself or stalls is told the next step). Whether
    a call repeats is decided by ``agent_engine.agent.repeats``, which also writes the repeat's note.

    A failing check's output usually names the code it tests (``temps.to_fahrenheit(0) = 23.0``, a
    traceback's ``temps.py``): those modules are the ``suspects``. Once the job has opened the check
    script itself (or tried to edit it), the advice points to a suspect it has not viewed, so a model
    that reads the check instead of the code is sent to the code; before that the advice stays generic
    (the task's text may name a data file the check's output does not)."""

    check: str | None = None  # the task's check command, when the task names one
    viewed: bool = False
    edited: bool = False
    suspects: list[str] = field(default_factory=list)  # files a failing check's output names
    viewed_files: set[str] = field(default_factory=set)
    touched_check: bool = False  # the job opened the check script or tried to edit it

    def advice(self, outcome: ToolOutcome, repeated: bool = False) -> str:
        """The line to append to ``outcome``'s observation ("" for none); ``repeated``: the call repeats
        an earlier one (the note saying so is the caller's)."""
        if outcome.format_error or outcome.submitted:
            return ""
        if outcome.exit_code == 0 and (outcome.tool_name == "view_file" or _reads_a_file(outcome.command)):
            self.viewed = True
            self.viewed_files.add(outcome.command.split()[-1].removeprefix("./"))
        script = self.check.split()[-1] if self.check else None
        if script is not None and outcome.tool_name in ("view_file", "edit_file") and \
                outcome.command.split()[-1].removeprefix("./") == script:
            self.touched_check = True
        if outcome.tool_name == "edit_file" and outcome.exit_code == 0:
            self.edited = True
            return f"Next: run the check ({self.check or 'the test'}) with bash."
        if self.check is not None and self.check in outcome.command and outcome.exit_code != 0:
            self.suspects = _files_named(outcome.observation, exclude=self.check.split()[-1]) or self.suspects
        return self._next_step(outcome, repeated)

    def _next_step(self, outcome: ToolOutcome, repeated: bool) -> str:
        is_check = self.check is not None and self.check in outcome.command
        if is_check and outcome.exit_code == 0:
            return "The check passes. Next: call submit."
        unseen = [f for f in self.suspects if f not in self.viewed_files]
        if unseen and self.touched_check and not self.edited:
            return (f"Next: view_file {unseen[0]}: the check's output points to the code in "
                    f"{' and '.join(self.suspects)} (fix that code, not the check).")
        if not self.viewed:
            return "Next: view_file the file the task names, to find the wrong code."
        if not self.edited or repeated:
            return ("Next: edit_file with old_text the wrong lines exactly as the file shows them and "
                    "new_text the corrected lines.")
        if is_check:
            return "The check still fails: read its output above, then edit_file again."
        return ""


_NAMED_MODULE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.[A-Za-z_][A-Za-z0-9_]*\(|\b([A-Za-z_][A-Za-z0-9_]*)\.py\b")
_NOT_MODULES = frozenset({"self", "cls", "os", "sys", "re", "json", "math", "str", "list", "dict", "set", "print"})


def _files_named(output: str, exclude: str) -> list[str]:
    """The ``NAME.py`` files a check's output names, in order of first mention: modules whose functions it
    calls (``temps.to_fahrenheit(0)``) and files in its tracebacks; never ``exclude`` (the check script)."""
    found: list[str] = []
    for m in _NAMED_MODULE.finditer(output):
        name = m.group(1) or m.group(2)
        path = f"{name}.py"
        if name not in _NOT_MODULES and path != exclude and path not in found:
            found.append(path)
    return found[:3]


def _reads_a_file(command: str) -> bool:
    """Whether a shell command shows a file (``cat``, ``head``, ``tail``, ``less``, ``more``)."""
    words = command.split()
    return len(words) >= 2 and words[0] in ("cat", "head", "tail", "less", "more")


def _as_tool_command(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ``bash`` command that names another tool (``view_file PATH``, ``edit_file PATH OLD NEW``,
    ``submit``) runs that tool, as SWE-agent's interface commands run in its shell; any other
    command stays ``bash``."""
    try:
        words = shlex.split(args["command"])
    except ValueError:
        return "bash", args
    shapes = {"view_file": ["path"], "edit_file": ["path", "old_text", "new_text"], "submit": []}
    if not words or words[0] not in shapes or len(words) - 1 != len(shapes[words[0]]):
        return "bash", args
    return words[0], dict(zip(shapes[words[0]], words[1:], strict=True))


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """A call's arguments as a dict (a JSON object string or a dict), None when they are not an object."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _file_command(name: str, args: dict[str, Any]) -> str:
    op = {"op": "view" if name == "view_file" else "edit", "path": args["path"],
          "old": args.get("old_text", ""), "new": args.get("new_text", "")}
    encoded = base64.b64encode(json.dumps(op).encode()).decode()
    return f"python3 -I -c {shlex.quote(_FILE_PROGRAM)} {encoded}"


def _format_error(message: str) -> ToolOutcome:
    return ToolOutcome(message, "", "", format_error=True)
