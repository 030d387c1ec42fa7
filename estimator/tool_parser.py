"""Which tool did a finished turn call? Parse the model's text (or its OpenAI ``tool_calls``).

Names follow the trace convention: a shell command is ``bash:<program>`` (``bash:pytest``,
``bash:grep``), a function call is its function name (``get_weather``).

Invariants:
- ``parse_tool_call`` never raises on any input; it returns None when no tool is named.
- Order of precedence: OpenAI ``tool_calls`` > a fenced ```bash/sh/shell block > a whole-text
  Python call (``[f(x=1), g()]``) > an inline ``<tool_call>{"name": ...}</tool_call>`` JSON.
- Only the first call counts (the first program of the first shell block, the first function).
- A returned name is never empty and ``normalize_tool_name`` is idempotent on it.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass

__all__ = ["ToolCall", "normalize_tool_name", "parse_shell", "parse_tool", "parse_tool_call"]

# ``mswea_bash_command`` is mini-swe-agent's text-mode action fence.
_FENCE = re.compile(r"```[ \t]*(bash|sh|shell|console|zsh|mswea_bash_command)?[ \t]*\r?\n(.*?)(?:```|\Z)",
                    re.S | re.I)
_TAGGED_JSON = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PIP = re.compile(r"^pip(\d+(\.\d+)*)?$")
_OPERATORS = {"&&", "||", ";", "|", "&", "|&", ";;", "\n"}
# Commands that only set up the environment for the real one after `&&` / `;`.
_SETUP = {"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "alias", "ulimit", "umask"}
# Wrappers whose own options (and, for some, one argument) precede the real command.
_WRAPPERS = {"sudo", "env", "timeout", "nohup", "time", "command", "exec", "nice", "stdbuf", "xargs"}
_WRAPPER_ARG = {"timeout": 1, "nice": 0, "stdbuf": 0}
_SHELL_FUNCS = {"bash", "shell", "sh", "terminal", "execute_bash", "run_shell_command", "run_command"}
_MODULE_TOOLS = {"pytest", "pip"}


@dataclass(frozen=True)
class ToolCall:
    """A parsed call: ``name`` as in the trace, ``command`` the first shell command (wrappers stripped)."""

    name: str
    command: str | None = None


def normalize_tool_name(name: str) -> str:
    """Map interpreter variants onto one name: ``bash:python3`` -> ``bash:python``, ``bash:pip3`` -> ``bash:pip``."""
    if not name.startswith("bash:"):
        return name
    prog = name[5:]
    if _PYTHON.match(prog):
        return "bash:python"
    if _PIP.match(prog):
        return "bash:pip"
    return name


def parse_tool(text: str | None, tool_calls: object = None) -> str | None:
    """The tool name the turn issued, or None. See ``parse_tool_call``."""
    call = parse_tool_call(text, tool_calls)
    return None if call is None else call.name


def parse_tool_call(text: str | None, tool_calls: object = None) -> ToolCall | None:
    """Parse the first tool call of a finished turn.

    ``tool_calls``: OpenAI-style calls as a list of dicts, one dict, or their JSON text.
    ``text``: the turn's decoded output.
    """
    try:
        call = _from_openai(tool_calls)
        if call is None and text:
            call = _from_text(text)
    except Exception:  # noqa: BLE001 - a parser must never take the engine down
        return None
    if call is None or not call.name:
        return None
    return call


# --------------------------------------------------------------------------- OpenAI tool_calls


def _from_openai(tool_calls: object) -> ToolCall | None:
    if tool_calls is None:
        return None
    if isinstance(tool_calls, (str, bytes)):
        try:
            tool_calls = json.loads(tool_calls)
        except ValueError:
            return None
    if isinstance(tool_calls, dict):
        tool_calls = tool_calls.get("tool_calls", [tool_calls])
    if not isinstance(tool_calls, (list, tuple)):
        return None
    for item in tool_calls:
        if not isinstance(item, dict):
            continue
        fn = item.get("function") if isinstance(item.get("function"), dict) else item
        name = fn.get("name")
        if isinstance(name, str) and name.strip():
            return _shell_function(name.strip(), fn.get("arguments", fn.get("parameters")))
    return None


def _shell_function(name: str, arguments: object) -> ToolCall:
    """A function named like a shell whose arguments carry a command is read as that command."""
    if name.lower() in _SHELL_FUNCS:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"command": arguments}
        if isinstance(arguments, dict):
            cmd = arguments.get("command", arguments.get("cmd"))
            if isinstance(cmd, list):
                cmd = " ".join(shlex.quote(str(c)) for c in cmd)
            if isinstance(cmd, str):
                parsed = parse_shell(cmd)
                if parsed is not None:
                    return parsed
    return ToolCall(name)


# --------------------------------------------------------------------------- free text


def _from_text(text: str) -> ToolCall | None:
    for m in _FENCE.finditer(text):
        lang = (m.group(1) or "").lower()
        body = m.group(2)
        if lang or _looks_like_shell(body):
            call = parse_shell(body)
            if call is not None:
                return call
    call = _python_call(text)
    if call is not None:
        return call
    m = _TAGGED_JSON.search(text)
    if m:
        return _from_openai(m.group(1))
    return None


def _looks_like_shell(body: str) -> bool:
    """An unlabeled fence counts as shell only if it starts with `$ ` (a console transcript)."""
    return body.lstrip().startswith("$ ")


def _python_call(text: str) -> ToolCall | None:
    """``[f(a=1), g()]`` or ``f(a=1)`` as the whole (stripped) text, as BFCL-style agents emit it."""
    src = text.strip()
    if src.startswith("```"):
        src = re.sub(r"^```[A-Za-z]*\s*\n?|\n?```\s*$", "", src).strip()
    if not src or "(" not in src:
        return None
    try:
        node = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        node = node.elts[0]
    if not isinstance(node, ast.Call):
        return None
    name = _dotted(node.func)
    return ToolCall(name) if name else None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


# --------------------------------------------------------------------------- shell


def parse_shell(script: str) -> ToolCall | None:
    """The first real program of a shell script, as ``bash:<program>``; None if there is none."""
    lines = _logical_lines(script)
    setup: ToolCall | None = None
    for line in lines:
        for segment in _segments(line):
            call = _segment_program(segment)
            if call is None:
                continue
            if call.name[5:] in _SETUP:
                setup = setup or call
                continue
            return call
    return setup


def _logical_lines(script: str) -> list[str]:
    """Non-empty, non-comment lines with `\\` continuations joined and a leading `$ ` prompt removed."""
    out: list[str] = []
    buf = ""
    for raw in script.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = (buf + line).strip()
        buf = ""
        if line.startswith("$ "):
            line = line[2:].strip()
        if line and not line.startswith("#"):
            out.append(line)
    if buf.strip():
        out.append(buf.strip())
    return out


def _segments(line: str) -> list[list[str]]:
    """Split one line into simple commands at ``&& || ; | &`` (quotes respected)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes: fall back to a plain split
        tokens = re.findall(r"&&|\|\||[;|&]|[^\s;|&]+", line)
    segments: list[list[str]] = [[]]
    for tok in tokens:
        if tok in _OPERATORS:
            segments.append([])
        else:
            segments[-1].append(tok)
    return [s for s in segments if s]


def _segment_program(tokens: list[str]) -> ToolCall | None:
    """Strip assignments and wrappers (``env X=1``, ``sudo -E``, ``timeout 30``) and name the program."""
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        if tok in ("(", "{", "!") or _ASSIGN.match(tok):
            i += 1
            continue
        base = tok.rsplit("/", 1)[-1]
        if base in _WRAPPERS:
            i += 1
            while i < n and (tokens[i].startswith("-") or _ASSIGN.match(tokens[i])):
                i += 1
            i += min(_WRAPPER_ARG.get(base, 0), n - i)
            continue
        break
    if i >= n:
        return None
    prog = tokens[i].rsplit("/", 1)[-1] if not tokens[i].endswith("/") else tokens[i]
    if not prog or prog.startswith(("<", ">")):
        return None
    rest = tokens[i + 1:]
    if _PYTHON.match(prog) and len(rest) >= 2 and rest[0] == "-m" and rest[1] in _MODULE_TOOLS:
        prog, rest = rest[1], rest[2:]
    name = normalize_tool_name(f"bash:{prog}")
    command = " ".join([name[5:], *rest[:3]])
    return ToolCall(name, command)
