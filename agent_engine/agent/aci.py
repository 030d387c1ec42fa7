"""The tool-calling agent's computer interface: six tools a small model can drive on a real repository.

``bash(command)`` runs a shell command; ``view_file(path, start_line, end_line)`` shows a file with
line numbers (a window of it; a big file without one: its outline and first lines; a folder: its map);
``search(pattern)`` finds a regex or text in the repository's files; ``replace_lines(path, start_line,
end_line, new_text)`` and ``edit_file(path, old_text, new_text)`` change a file and answer with the
edited lines in context; ``submit()`` ends the job. As in SWE-agent's interface, every observation says
what happened and what changed, and a failed edit says why and that nothing changed. The repository
map (``repo_map``: every file, each module's classes and functions with their line numbers, after
Aider's) opens the job, in the task message (``agent_engine.agent.loop``).

Invariants:
- Every tool runs inside the job's ``Sandbox``: view, search, edits, the map and the failing code are
  one short ``python3 -I`` program (``tool_program``: ``agent_engine.agent.file_tool``'s source, then
  ``agent_engine.agent.repo_tool``'s, run in one namespace) given its arguments as base64 JSON, so the
  sandbox's confinement (its folder, limits, no network) covers them exactly as it covers ``bash``;
  nothing here reads the repository's files on the host. Isolated mode keeps the repository off its
  import path: a repository's ``json.py`` or ``ast.py`` never shadows the program's own modules.
- ``edit_file`` changes the file only when ``old_text`` occurs exactly once, either verbatim or, failing
  that, line by line with leading and trailing blanks ignored (then ``new_text`` is re-indented to the
  first matched line's indentation); otherwise the file is unchanged and the observation says so, and
  shows what the model probably meant (``agent_engine.agent.file_tool``: the occurrences' line numbers,
  the lines equal but for whitespace, or the closest lines by ``difflib``, bounded). No edit writes a
  read-only file (the task's check; the refusal names the library's modules to fix instead) or breaks
  a Python module's syntax.
- An answer cut at the token limit (``cut``: the server's ``finish_reason`` was "length") never
  changes anything: its ``bash``, ``edit_file`` or ``replace_lines`` call is refused with the reason
  (``ToolOutcome.cut``), as is any call whose arguments did not arrive whole; a whole read-only call
  (``view_file``, ``search``, ``submit``) still runs.
- ``run_tool_call`` never raises for a bad call: an unknown tool, arguments that are not a JSON object,
  a missing argument or a line number that is not a whole number give ``ToolOutcome.format_error``
  with an observation naming the problem. Line numbers may come as numbers or digit strings.
- A ``bash`` command whose words are another tool and exactly its arguments (``view_file calc.py``,
  ``view_file calc.py 10 40``, ``search parse_sum``) runs that tool: small models often type the tools
  as shell commands (the text interface runs them the same way).
- ``edit_file`` also takes ``old_text`` copied from ``view_file`` with its line numbers (``  4| ``): when
  every line carries one and the text is not found as given, the numbers are dropped and it is tried
  again; ``replace_lines`` takes ``new_text`` so copied the same way.
- A failing command's output (``annotate``: a nonzero exit with a traceback or test failures) gets the
  failing tests' names and the library code on the failing path (``agent_engine.agent.failures`` reads
  the output on the host, ``agent_engine.agent.repo_tool`` shows the code in the sandbox), bounded;
  a long unittest report is summarized first (its first failures whole, the others one line each).
- ``Progress.advice`` only adds a line after the observation, read from what the job did (viewed,
  edited, a repeated call, the check's exit code); it never changes what a tool did.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_engine.agent.failing_code import FAILURE_CHARS
from agent_engine.agent.failures import cap_text, failures_line, read_failures, summarize_unittest
from agent_engine.agent.repo_tool import SANDBOX_NAMESPACE
from agent_engine.agent.sandbox import CommandResult, Sandbox

__all__ = ["CUT_MESSAGE", "EDIT_TOOLS", "FAILURE_CHARS", "MAP_CHARS", "MAX_COMMAND_CHARS", "SYSTEM_PROMPT_TOOLS",
           "SYSTEM_PROMPT_TOOLS_CHECKED", "TOOLS", "Annotated", "Progress", "ToolOutcome",
           "annotate", "focus_words", "parse_arguments", "program_command_chars", "repo_map", "run_program",
           "run_tool_call",
           "shell_tool_call", "tool_program"]

SYSTEM_PROMPT_TOOLS = (
    "You are a careful software engineer fixing a bug in a Python repository. The task message lists the "
    "repository's files, with each module's classes and functions at their line numbers. Call exactly one "
    "tool per reply. Work in this order:\n"
    "1. Run the check with bash to see what fails; a failing run shows the code on the failing path.\n"
    "2. Read the code: view_file with start_line and end_line, or search for a name.\n"
    "3. Fix the library's code with replace_lines (line numbers as view_file shows them) or edit_file. "
    "Tests and the check are read-only.\n"
    "4. Run the check again. If it still fails, read its output and fix again.\n"
    "5. When the check passes, call submit."
)
SYSTEM_PROMPT_TOOLS_CHECKED = (
    "You are a careful software engineer fixing a bug in a Python repository. The task message lists the "
    "repository's files, with each module's classes and functions at their line numbers, and the check's "
    "output: the failing tests and the library code on the failing path. Call exactly one tool per reply. "
    "Work in this order:\n"
    "1. Read the failing tests and the code shown; view_file with start_line and end_line, or search for a "
    "name, to read more.\n"
    "2. Fix the library's code with replace_lines (line numbers as view_file shows them) or edit_file: "
    "change only the wrong lines. Tests and the check are read-only.\n"
    "3. Each edit runs the check: an edit that makes it worse is undone; when it passes, you are done. If it "
    "still fails, read its output and fix again."
)
CUT_MESSAGE = ("Your answer was cut at the token limit before the call was complete, so nothing was run or "
               "changed. Make a shorter call: replace_lines on fewer lines, or a shorter command.")
MAP_CHARS = 2000  # the repository map's budget in the task message
FOLDER_MAP_CHARS = 3000  # view_file of a folder


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description, "strict": True,
        "parameters": {"type": "object", "properties": properties, "required": list(properties),
                       "additionalProperties": False}}}


_STRING = {"type": "string"}
_LINE = {"type": "integer"}
TOOLS: list[dict[str, Any]] = [
    _function("bash", "Run a shell command in the repository, e.g. the check. Shows its exit code and output.",
              {"command": _STRING}),
    _function("view_file", "Show lines start_line to end_line of a file, numbered (0 and 0: all of a small "
              "file, the outline of a big one). A folder: its files, classes and functions.",
              {"path": _STRING, "start_line": _LINE, "end_line": _LINE}),
    _function("search", "Find a name or text in the repository's files. Shows each match as file:line: text.",
              {"pattern": _STRING}),
    _function("replace_lines", "Replace lines start_line to end_line of a file (numbers as view_file shows "
              "them) by new_text.", {"path": _STRING, "start_line": _LINE, "end_line": _LINE, "new_text": _STRING}),
    _function("edit_file", "Replace old_text, copied exactly from the file, by new_text.",
              {"path": _STRING, "old_text": _STRING, "new_text": _STRING}),
    _function("submit", "Finish, once the check passes.", {}),
]
# What each tool needs at run time: strings, line numbers, line numbers it may go without (the schema
# above, strict for constrained servers, asks for all of them).
_STRINGS = {"bash": ("command",), "view_file": ("path",), "search": ("pattern",),
            "replace_lines": ("path", "new_text"), "edit_file": ("path", "old_text", "new_text"), "submit": ()}
_LINES = {"replace_lines": ("start_line", "end_line")}
_OPTIONAL_LINES = {"view_file": ("start_line", "end_line")}
EDIT_TOOLS = frozenset({"edit_file", "replace_lines"})
_WRITING_TOOLS = EDIT_TOOLS | {"bash"}
# The shell forms of the tools (``view_file PATH [START END]``): their arguments, in order.
_SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "view_file": (("path",), ("path", "start_line", "end_line")), "search": (("pattern",),),
    "replace_lines": (("path", "start_line", "end_line", "new_text"),),
    "edit_file": (("path", "old_text", "new_text"),), "submit": ((),)}
_SOURCES = [(Path(__file__).resolve().parent / name).read_text(encoding="utf-8")
            for name in ("edit_undo.py", "text_match.py", "file_view.py", "file_tool.py", "failing_code.py",
                         "suspect_priors.py", "name_flow.py", "code_notes.py", "repair_tool.py", "mutant_screen.py",
                         "repo_tool.py")]


def tool_program() -> str:
    """The program every file and repository tool runs in the sandbox (``python3 -I -B -c PROGRAM ARG``:
    isolated, and writing no bytecode: the ops that import the repository would leave ``.pyc`` files that
    a same-size edit within the same second reads stale): ``edit_undo``'s, ``text_match``'s,
    ``file_view``'s, ``file_tool``'s, ``failing_code``'s, ``suspect_priors``', ``name_flow``'s,
    ``code_notes``', ``repair_tool``'s,
    ``mutant_screen``'s and then ``repo_tool``'s sources, executed in one namespace named ``SANDBOX_NAMESPACE`` (so none runs its own ``__main__``
    block), then ``repo_tool``'s ``main``. The
    sources travel compressed (zlib, base64): the program is one argument, and Linux caps one at 128 KiB."""
    packed = base64.b64encode(zlib.compress(json.dumps(_SOURCES).encode(), 9)).decode()
    return ("import base64, json, sys, zlib\n"
            f"namespace = {{'__name__': {SANDBOX_NAMESPACE!r}, '__builtins__': __builtins__}}\n"
            f"for source in json.loads(zlib.decompress(base64.b64decode({packed!r}))):\n"
            "    exec(compile(source, 'agent_tool', 'exec'), namespace)\n"
            "sys.exit(namespace['main'](sys.argv))\n")


_PROGRAM = tool_program()
MAX_COMMAND_CHARS = 128 * 1024 - 1024  # Linux caps one argument (the shell's command) at 128 KiB; a margin


def run_program(sandbox: Sandbox, op: dict[str, Any], max_output_chars: int | None = None,
                timeout: float | None = None) -> CommandResult:
    """Run one op of the tool program in ``sandbox`` (see ``tool_program``); its output is cut at the
    sandbox's limit unless ``max_output_chars`` says otherwise (an op whose output is data, not an
    observation), and it runs for the sandbox's command timeout unless ``timeout`` is shorter. An op
    whose command is longer than ``MAX_COMMAND_CHARS`` fails to start (exit status 126 or 127)."""
    return sandbox.run(_program_command(op), max_output_chars=max_output_chars, timeout=timeout)


def program_command_chars(op: dict[str, object]) -> int:
    """The length of the command ``run_program`` runs for ``op`` (at most ``MAX_COMMAND_CHARS`` to start)."""
    return len(_program_command(op))


def _program_command(op: dict[str, object]) -> str:
    encoded = base64.b64encode(json.dumps(op).encode()).decode()
    return f"python3 -I -B -c {shlex.quote(_PROGRAM)} {encoded}"


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call did: the observation sent back, the command as the trace names it, and flags;
    ``code_files`` are the library files a failing command's annotation showed."""

    observation: str
    command: str
    tool_name: str
    exit_code: int | None = None
    timed_out: bool = False
    submitted: bool = False
    format_error: bool = False
    cut: bool = False
    code_files: tuple[str, ...] = ()


def run_tool_call(sandbox: Sandbox, call: dict[str, Any], *, cut: bool = False, failure_code: bool = True,
                  output_chars: int | None = None) -> ToolOutcome:
    """Run one OpenAI-style tool call (``{"function": {"name", "arguments"}}``) in ``sandbox``; ``cut``:
    the answer ended at the token limit; ``failure_code``: annotate a failing command's output;
    ``output_chars``: keep a command's output to that many characters (its annotation apart)."""
    function = call.get("function") or {}
    name, args = function.get("name"), parse_arguments(function.get("arguments"))
    if name not in _STRINGS:
        return _format_error(f"There is no tool {name!r}. Call one of: {', '.join(_STRINGS)}.")
    if args is None:
        if cut:
            return ToolOutcome(CUT_MESSAGE, str(name), str(name), exit_code=1, cut=True)
        return _format_error(f"The arguments of {name} must be a JSON object.")
    problem = _check_arguments(name, args)
    if problem:
        return _format_error(problem)
    if name == "bash":
        name, args = _as_tool_command(args)
    shown = args["command"] if name == "bash" else f"{name} {args.get('path', args.get('pattern', ''))}".rstrip()
    if cut and name in _WRITING_TOOLS:
        return ToolOutcome(CUT_MESSAGE, shown, name, exit_code=1, cut=True)
    if name == "submit":
        return ToolOutcome("Submitted.", "submit", "submit", submitted=True)
    if name == "bash":
        result = sandbox.run(args["command"])
        output = result.output if output_chars is None else cap_text(result.output, output_chars)
        text, files = f"exit code {result.exit_code}\n{output}", ()
        if failure_code and result.exit_code != 0:
            annotated = annotate(sandbox, result.output, output_chars)
            text, files = f"exit code {result.exit_code}\n{annotated.text}", annotated.code_files
        return ToolOutcome(text.rstrip("\n"), shown, "bash", result.exit_code, result.timed_out, code_files=files)
    result = run_program(sandbox, _program_op(name, args))
    return ToolOutcome(result.output.rstrip("\n") or "(no output)", shown, name, result.exit_code, result.timed_out)


def _check_arguments(name: str, args: dict[str, Any]) -> str:
    """What is wrong with a call's arguments ("" when nothing)."""
    missing = [k for k in _STRINGS[name] if not isinstance(args.get(k), str)]
    missing += [k for k in _LINES.get(name, ()) if k not in args]
    if missing:
        return f"{name} needs the argument(s) {', '.join(missing)}."
    for k in _LINES.get(name, ()) + _OPTIONAL_LINES.get(name, ()):
        if k in args and args[k] is not None and _line_number(args[k]) is None:
            return f"{k} must be a whole number (a line number as view_file shows it), not {args[k]!r}."
    return ""


def _line_number(value: Any) -> int | None:
    """A line number given as an int, an integral float or a digit string; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    return None


def _program_op(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The tool program's op for a file or search call."""
    lines = {k: _line_number(args.get(k)) or 0 for k in ("start_line", "end_line")}
    if name == "view_file":
        return {"op": "view", "path": args["path"], "start": lines["start_line"], "end": lines["end_line"],
                "budget": FOLDER_MAP_CHARS}
    if name == "search":
        return {"op": "search", "pattern": args["pattern"]}
    if name == "replace_lines":
        return {"op": "lines", "path": args["path"], "start": lines["start_line"], "end": lines["end_line"],
                "new": args["new_text"]}
    return {"op": "edit", "path": args["path"], "old": args["old_text"], "new": args["new_text"]}


@dataclass(frozen=True)
class Annotated:
    """A failing command's output with what failed appended, and the library files that shows."""

    text: str
    code_files: tuple[str, ...] = ()


_SHOWN_FILE = re.compile(r"^(\S+\.py), (?:def|class) ", re.M)


def annotate(sandbox: Sandbox, output: str, max_chars: int | None = None) -> Annotated:
    """``output`` of a failing command, a long unittest report summarized (then kept to ``max_chars``),
    with the failing tests' names and the library code on the failing path appended (run in
    ``sandbox``; at most ``FAILURE_CHARS`` or ``max_chars``, the fewer); unchanged but for the
    summary and the cut when it shows no failure."""
    failures = read_failures(output)
    text = summarize_unittest(output)
    text = text if max_chars is None else cap_text(text, max_chars)
    notes = [failures_line(failures)] if failures.tests else []
    files: tuple[str, ...] = ()
    if failures.tracebacks:
        frames = [[[path, line] for path, line in tb] for tb in failures.tracebacks]
        chars = FAILURE_CHARS if max_chars is None else min(FAILURE_CHARS, max_chars)
        code = run_program(sandbox, {"op": "failing_code", "tracebacks": frames, "chars": chars})
        if code.exit_code == 0 and code.output.strip():
            notes.append(code.output.rstrip("\n"))
            files = tuple(dict.fromkeys(_SHOWN_FILE.findall(code.output)))
    if not notes:
        return Annotated(text)
    return Annotated(text.rstrip("\n") + "\n\n" + "\n".join(notes), files)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def focus_words(task: str, limit: int = 60) -> list[str]:
    """The identifiers a task's text names (``LRUCache``, ``parse_sum``, ``exprcalc``), in order, at most
    ``limit``: the repository map keeps the modules they name in more detail."""
    return list(dict.fromkeys(_WORD.findall(task)))[:limit]


def repo_map(sandbox: Sandbox, budget: int = MAP_CHARS, focus: list[str] | None = None) -> str:
    """The repository map, computed in ``sandbox`` (``agent_engine.agent.repo_tool.repo_map``); "" when
    it could not be made."""
    result = run_program(sandbox, {"op": "map", "path": ".", "budget": budget, "focus": focus or []})
    return result.output.rstrip("\n") if result.exit_code == 0 else ""


@dataclass
class Progress:
    """What a job has done so far, read for the one line of advice after each observation (after
    SWE-agent's interface: a small model that repeats itself or stalls is told the next step). Whether
    a call repeats is decided by ``agent_engine.agent.repeats``, which also writes the repeat's note.

    A failing check's output usually names the code it tests (``temps.to_fahrenheit(0) = 23.0``, a
    traceback's ``temps.py``, the library code its annotation shows): those modules are the
    ``suspects``. Once the job has opened the check script itself (or tried to edit a read-only file),
    the advice points to a suspect it has not viewed, so a model that reads the check instead of the
    code is sent to the code; before that the advice stays generic (the task's text may name a data
    file the check's output does not)."""

    check: str | None = None  # the task's check command, when the task names one
    viewed: bool = False
    edited: bool = False
    suspects: list[str] = field(default_factory=list)  # files a failing check's output names
    viewed_files: set[str] = field(default_factory=set)
    touched_check: bool = False  # the job opened the check script or tried to edit a read-only file

    def advice(self, outcome: ToolOutcome, repeated: bool = False) -> str:
        """The line to append to ``outcome``'s observation ("" for none); ``repeated``: the call repeats
        an earlier one (the note saying so is the caller's)."""
        if outcome.format_error or outcome.submitted or outcome.cut:
            return ""
        target = outcome.command.split()[-1].removeprefix("./") if outcome.command.split() else ""
        if outcome.exit_code == 0 and (outcome.tool_name in ("view_file", "search") or _reads_a_file(outcome.command)):
            self.viewed = True
            if outcome.tool_name != "search":
                self.viewed_files.add(target)
        script = self.check.split()[-1] if self.check else None
        if script is not None and outcome.tool_name in ("view_file", *EDIT_TOOLS) and target == script:
            self.touched_check = True
        if outcome.tool_name in EDIT_TOOLS and "is read-only" in outcome.observation:
            self.touched_check = True
        if outcome.tool_name in EDIT_TOOLS and outcome.exit_code == 0:
            self.edited = True
            return f"Next: run the check ({self.check or 'the test'}) with bash."
        if self.check is not None and self.check in outcome.command and outcome.exit_code != 0:
            named = list(outcome.code_files) or _files_named(outcome.observation, exclude=self.check.split()[-1])
            self.suspects = named or self.suspects
        return self._next_step(outcome, repeated)

    def _next_step(self, outcome: ToolOutcome, repeated: bool) -> str:
        is_check = self.check is not None and self.check in outcome.command
        if is_check and outcome.exit_code == 0:
            return "The check passes. Next: call submit."
        unseen = [f for f in self.suspects if f not in self.viewed_files]
        if unseen and self.touched_check and not self.edited:
            return (f"Next: view_file {unseen[0]}: the check's output points to the code in "
                    f"{' and '.join(self.suspects)} (fix that code, not the check).")
        if outcome.code_files and not repeated:
            if self.edited:
                return "The check still fails: read its output and the code above, then fix the code again."
            return ("Next: fix the library code shown above (replace_lines with its line numbers, or edit_file); "
                    "view_file shows more lines.")
        if not self.viewed:
            return "Next: view_file the file the task names, to find the wrong code."
        if not self.edited or repeated:
            return ("Next: fix the wrong lines with replace_lines (line numbers as view_file shows them) or "
                    "edit_file (old_text exactly as the file shows it).")
        if is_check:
            return "The check still fails: read its output above, then fix the code again."
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


def shell_tool_call(command: str) -> dict[str, Any] | None:
    """The tool call a shell command spells (``view_file PATH [START END]``, ``search PATTERN``,
    ``replace_lines PATH START END NEW``, ``edit_file PATH OLD NEW``, ``submit``), as SWE-agent's
    interface commands run in its shell; None for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0] not in _SHAPES:
        return None
    for shape in _SHAPES[words[0]]:
        if len(words) - 1 == len(shape):
            args = dict(zip(shape, words[1:], strict=True))
            return {"id": "shell", "type": "function", "function": {"name": words[0], "arguments": json.dumps(args)}}
    return None


def _as_tool_command(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ``bash`` command that names another tool runs that tool (``shell_tool_call``); any other command
    stays ``bash``."""
    call = shell_tool_call(args["command"])
    if call is None:
        return "bash", args
    named = parse_arguments(call["function"]["arguments"]) or {}
    name = call["function"]["name"]
    return (name, named) if not _check_arguments(name, named) else ("bash", args)


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """A call's arguments as a dict (a JSON object string or a dict), None when they are not an object."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _format_error(message: str) -> ToolOutcome:
    return ToolOutcome(message, "", "", format_error=True)
