"""What a model's answer writes over a suspect of the rewrite stage, read from the text alone.

A suspect is a function, or a short file as a whole, as the sandbox read it; an answer is the model's
text. The stage (``agent_engine.agent.rewrites``) shows the suspect (``shown_source``), reads what an
answer would write (``rewritten``), splits a failed rewrite into its single changes
(``single_changes``) and moves later suspects when a rewrite above them is kept (``shifted``).

Invariants:
- Pure: every function reads only the strings it is given.
- ``rewritten`` returns text to write in place of the suspect's lines, or None: no fenced block that
  parses (and defines the suspect's function), or nothing but comments and layout changed (the syntax
  tree is the same). A function's rewrite gets the suspect's own docstring back and its indentation;
  a long function's (``lines``) is the function with the named line range replaced, never a line
  outside it.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from dataclasses import dataclass, replace

__all__ = ["Suspect", "diff_lines", "line_text", "numbered", "probe_lines", "replaced_line", "rewritten", "rewritten_file", "rewritten_function",
           "rewritten_lines", "same_code", "shifted", "shown_source", "single_changes"]

MAX_CHANGES_SPLIT = 8  # a rewrite making more changes than this is not split into single changes
_BLOCK = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.S)
MAX_PROBED_LINES = 30  # a function with more code lines than this is not asked about line by line
MAX_NOTES, NOTE_CHARS = 4, 400  # a suspect's linter notes a prompt shows, at most
MAX_LOST = 8  # names whose lost assignment the mutants look for, per suspect
_NOT_PROBED = re.compile(r"^\s*(?:#.*|else:|try:|finally:|[)\]}]+[,:]?)\s*$")
_NUMBERED = re.compile(r"^\s*[0-9]+ ")
_INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINE_RANGE = re.compile(r"\b[Ll]ines?\s+([0-9]+)(?:\s*(?:-|–|to|and)\s*([0-9]+))?")


@dataclass(frozen=True)
class Suspect:
    """A function (``kind`` ``function``) or a short whole file (``file``) to rewrite, as the sandbox read it."""

    path: str
    name: str
    first: int
    last: int
    text: str
    kind: str = "function"
    notes: tuple[tuple[int, str], ...] = ()  # what a linter sees in it: (file line, text) (``code_notes``)
    lost: tuple[str, ...] = ()  # names whose assignment it may have lost (``code_notes.lost_names``)

    @classmethod
    def printed(cls, found: object) -> Suspect | None:
        """A suspect of the sandbox's ``suspects`` op as it printed it (JSON), or None when it lacks a field;
        its notes and lost names kept to what a prompt and the mutants may take (``printed_notes``,
        ``printed_names``)."""
        if not isinstance(found, dict) or not {"path", "name", "first", "last", "text"} <= found.keys():
            return None
        return cls(str(found["path"]), str(found["name"]), int(found["first"]), int(found["last"]),
                   str(found["text"]), str(found.get("kind") or "function"), printed_notes(found.get("notes")),
                   printed_names(found.get("lost")))

    @property
    def whole_file(self) -> bool:
        return self.kind == "file"

    @property
    def by_lines(self) -> bool:
        """A function too long to ask for whole: the model is shown it numbered and rewrites a line range."""
        return self.kind == "lines"

    def rewrite_op(self, new: str) -> dict[str, object]:
        """The tool program's ``rewrite`` op that writes ``new`` over these lines while they still read as
        shown."""
        return {"op": "rewrite", "path": self.path, "first": self.first, "last": self.last, "old": self.text, "new": new}


def printed_notes(found: object) -> tuple[tuple[int, str], ...]:
    """A suspect's linter notes as the sandbox printed them (``[line, text]`` pairs): at most ``MAX_NOTES``,
    each text at most ``NOTE_CHARS`` (anything else is dropped)."""
    if not isinstance(found, list):
        return ()
    return tuple((n[0], n[1]) for n in found if isinstance(n, list) and len(n) == 2 and type(n[0]) is int
                 and isinstance(n[1], str) and 0 < len(n[1]) <= NOTE_CHARS)[:MAX_NOTES]


def printed_names(found: object) -> tuple[str, ...]:
    """A suspect's lost names as the sandbox printed them: identifiers only, at most ``MAX_LOST``."""
    if not isinstance(found, list):
        return ()
    return tuple(n for n in found if isinstance(n, str) and n.isidentifier())[:MAX_LOST]


def rewritten(answer: str, suspect: Suspect) -> str | None:
    """What an answer writes over ``suspect``: the whole file (``rewritten_file``) or the function
    (``rewritten_function``); None when it holds nothing to write or only changes comments and layout."""
    if suspect.whole_file:
        new = rewritten_file(answer, suspect)
    elif suspect.by_lines:
        new = rewritten_lines(answer, suspect)
    else:
        new = rewritten_function(answer, suspect)
    return None if new is None or same_code(new, suspect) else new


def rewritten_lines(answer: str, suspect: Suspect) -> str | None:
    """The suspect function with the line range an answer names (``Lines 12-14:`` or ``Line 12:`` before
    its last fenced block, numbered as the file is) replaced by that block, re-indented as the lines it
    replaces; None when there is no such range inside the function or the result does not parse."""
    blocks = list(_BLOCK.finditer(answer))
    if not blocks:
        return None
    block = blocks[-1]
    ranges = list(_LINE_RANGE.finditer(answer, 0, block.start()))
    if not ranges:
        return None
    first = int(ranges[-1].group(1))
    last = int(ranges[-1].group(2) or first)
    if not suspect.first <= first <= last <= suspect.last:
        return None
    lines = suspect.text.split("\n")
    old = lines[first - suspect.first:last - suspect.first + 1]
    new = _reindented_block(_unnumbered(block.group(1).rstrip("\n").split("\n")), _indent_of(old))
    text = "\n".join(lines[:first - suspect.first] + new + lines[last - suspect.first + 1:])
    try:
        ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return None
    return text


def probe_lines(suspect: Suspect) -> list[int]:
    """The file line numbers of a function suspect's code lines worth asking about one at a time (its body,
    not blank, a comment, its docstring, nor a bare ``else:``, ``try:`` or closing bracket); [] for a file,
    a long function, or more than ``MAX_PROBED_LINES`` such lines."""
    if suspect.kind != "function":
        return []
    head, doc, rest = _docstring_split(textwrap.dedent(suspect.text))
    start = suspect.first + len(head) + len(doc)
    found = [start + j for j, line in enumerate(rest) if line.strip() and not _NOT_PROBED.match(line)]
    return found if len(found) <= MAX_PROBED_LINES else []


def asked_lines(suspect: Suspect) -> list[int]:
    """The lines the stage asks about one at a time: those its linter notes point at (inside the function,
    whatever its length: a line may be missing there), then ``probe_lines``."""
    noted = [line for line, _ in suspect.notes if suspect.kind != "file" and suspect.first < line <= suspect.last]
    return list(dict.fromkeys([*noted, *probe_lines(suspect)]))


def line_text(suspect: Suspect, line: int) -> str:
    """The text of the file's ``line`` inside the suspect, stripped."""
    return suspect.text.split("\n")[line - suspect.first].strip()


def replaced_line(answer: str, suspect: Suspect, line: int) -> str | None:
    """The suspect as an answer about its file line ``line`` rewrites it: the whole function when the
    answer's block holds it; else the line replaced by the answer's last fenced block (one line or a few,
    re-indented as that line), or by the last inline code span (`` `x = 1` ``) that parses when the
    answer has no block; None when nothing parses or only comments and layout change."""
    whole = rewritten(answer, suspect)
    if whole is not None:
        return whole
    lines = suspect.text.split("\n")
    at = line - suspect.first
    if not 0 <= at < len(lines):
        return None
    blocks = [b.strip("\n") for b in _BLOCK.findall(answer) if b.strip()]
    spans = [] if blocks else [x for x in _INLINE_CODE.findall(answer)
                               if x.strip() != lines[at].strip() and not x.strip().isidentifier()]
    for candidate in blocks[-1:] + spans[::-1]:
        new = _reindented_block(candidate.split("\n"), _indent_of([lines[at]]))
        text = "\n".join(lines[:at] + new + lines[at + 1:])
        try:
            ast.parse(textwrap.dedent(text))
        except (SyntaxError, ValueError):
            continue
        return None if same_code(text, suspect) else text
    return None


def _unnumbered(block: list[str]) -> list[str]:
    """``block`` without the line numbers the model copied from the numbered source (every non-blank line
    starting with a number and a space), else as it is."""
    if all(_NUMBERED.match(x) for x in block if x.strip()):
        return [_NUMBERED.sub("", x, count=1) for x in block]
    return block


def numbered(suspect: Suspect) -> str:
    """The suspect's lines, each after its line number in the file."""
    width = len(str(suspect.last))
    return "\n".join(f"{suspect.first + i:>{width}} {line}" for i, line in enumerate(suspect.text.split("\n")))


def _reindented_block(block: list[str], indent: str) -> list[str]:
    """``block`` moved so its least indented line starts at ``indent``."""
    dedented = textwrap.dedent("\n".join(block)).split("\n")
    return [indent + x if x.strip() else "" for x in dedented]


def same_code(new: str, suspect: Suspect) -> bool:
    """Whether ``new`` is the suspect's Python code with other comments or layout only (same syntax tree)."""
    if suspect.whole_file and not suspect.path.endswith(".py"):
        return _same(new, suspect.text)
    try:
        return ast.dump(ast.parse(textwrap.dedent(new))) == ast.dump(ast.parse(textwrap.dedent(suspect.text)))
    except (SyntaxError, ValueError):
        return False


def rewritten_file(answer: str, suspect: Suspect) -> str | None:
    """The last fenced block of an answer as the new text of a whole-file suspect (a Python file's must
    parse); None when there is none or it changes nothing."""
    for block in reversed(_BLOCK.findall(answer)):
        new = block.rstrip("\n")
        if suspect.path.endswith(".py"):
            try:
                ast.parse(new)
            except (SyntaxError, ValueError):
                continue
        if new.strip() and not _same(new, suspect.text):
            return new
    return None


def rewritten_function(answer: str, suspect: Suspect) -> str | None:
    """The function an answer rewrites, with the suspect's own docstring (the model is shown none) and
    indented as the suspect is; None when the answer holds no fenced block that parses and defines a
    function of the suspect's name, or rewrites nothing."""
    short = suspect.name.split(".")[-1]
    for block in _BLOCK.findall(answer):
        code = textwrap.dedent(block).strip("\n")
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        node = _defined(tree, short)
        if node is None:
            continue
        lines = code.split("\n")
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body = textwrap.dedent("\n".join(lines[first - 1:node.end_lineno or node.lineno]))
        head, _, rest = _docstring_split(body)
        original = _docstring_split(textwrap.dedent(suspect.text))
        docstring = _reindented(original[1], _indent_of(original[2]), _indent_of(rest))
        indent = suspect.text[:len(suspect.text) - len(suspect.text.lstrip())].split("\n")[-1]
        new = "\n".join(indent + x if x.strip() else "" for x in head + docstring + rest)
        return None if _same(new, suspect.text) else new
    return None


def shown_source(suspect: Suspect) -> str:
    """The suspect as the model is shown it: a file as it is; a function dedented, without its docstring
    (fewer tokens, and no backticks of its own to end the answer's fenced block early;
    ``rewritten_function`` puts it back)."""
    if suspect.whole_file:
        return suspect.text
    if suspect.by_lines:
        return numbered(suspect)
    head, _, rest = _docstring_split(textwrap.dedent(suspect.text))
    return "\n".join(head + rest)


def _docstring_split(code: str) -> tuple[list[str], list[str], list[str]]:
    """A dedented function's lines as (up to its body, its docstring, the rest of its body); the whole
    function as the first part when it does not parse or its body shares the ``def`` line."""
    lines = code.split("\n")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return lines, [], []
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if node is None or not node.body or node.body[0].lineno == node.lineno:
        return lines, [], []
    start = node.body[0].lineno - 1
    doc = node.body[0]
    if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
        end = doc.end_lineno or doc.lineno
        return lines[:start], lines[start:end], lines[end:]
    return lines[:start], [], lines[start:]


def _indent_of(lines: list[str]) -> str:
    return next((x[:len(x) - len(x.lstrip())] for x in lines if x.strip()), "")


def _reindented(lines: list[str], was: str, now: str) -> list[str]:
    """``lines`` moved from the indentation ``was`` to ``now`` (as they were when not indented by ``was``)."""
    if was == now:
        return lines
    return [now + x[len(was):] if x.startswith(was) else x for x in lines]


def _defined(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function ``name`` at the top of ``tree`` or as a method of its one class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for cls in classes[:1]:
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return node
    return None


def _same(a: str, b: str) -> bool:
    """Whether two sources are the same code (blank lines and trailing blanks aside)."""
    def norm(t: str) -> list[str]:
        return [x.rstrip() for x in t.split("\n") if x.strip()]
    return norm(a) == norm(b)


def single_changes(old: str, new: str) -> list[str]:
    """``old`` with one of the changes that turn it into ``new`` each (a replaced, inserted or deleted run
    of lines); [] when ``new`` makes fewer than two changes or more than ``MAX_CHANGES_SPLIT``."""
    a, b = old.split("\n"), new.split("\n")
    changes = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not 2 <= len(changes) <= MAX_CHANGES_SPLIT:
        return []
    return ["\n".join(a[:i1] + b[j1:j2] + a[i2:]) for _, i1, i2, j1, j2 in changes]


def diff_lines(old: str, new: str) -> str:
    """The lines that differ, as a unified diff without its header."""
    lines = difflib.unified_diff(old.split("\n"), new.split("\n"), lineterm="", n=0)
    return "\n".join(x for x in list(lines)[2:] if not x.startswith("@@"))


def shifted(later: list[Suspect], kept: Suspect, new: str) -> list[Suspect]:
    """``later`` suspects with their line numbers moved by a rewrite of ``kept`` kept above them."""
    delta = len(new.split("\n")) - (kept.last - kept.first + 1)
    return [replace(s, first=s.first + delta, last=s.last + delta) if s.path == kept.path and s.first > kept.last
            else s for s in later]
