"""What the model sees of a file: numbered lines, ``view_file``'s bounded windows and a big file's
outline, a missing path's neighbours. Part of the sandbox's tool program (``aci.tool_program`` runs
this source after ``text_match``'s and before ``file_tool``'s, in one namespace); importing it runs
nothing, and it needs nothing but the standard library (``ast`` for a module's definitions).

Invariants:
- ``view`` never floods a small model's context: a file of at most ``WHOLE_FILE_LINES`` lines and
  ``WHOLE_FILE_CHARS`` characters is shown whole with line numbers; a bigger one without a window
  shows its outline (each class and function line, numbered, at most ``OUTLINE_ENTRIES``), its first
  ``HEAD_LINES`` lines and how to ask for more; a window (``start``/``end``, 1-based, inclusive)
  shows at most ``WINDOW_LINES`` lines and ``VIEW_CHARS`` characters. Every shown line is cut to
  ``VIEW_LINE_CHARS`` characters.
- A path that does not exist shows the files of its nearest existing folder (at most
  ``MAX_LISTED``) and the closest paths in the tree (``difflib``).
"""

from __future__ import annotations

import ast
import difflib
import os

if __name__.startswith("agent_engine."):  # on the host; in the sandbox text_match's ran first
    from agent_engine.agent.text_match import LINE_CHARS

WHOLE_FILE_LINES = 150  # a file up to this many lines (and WHOLE_FILE_CHARS characters) is shown whole
WHOLE_FILE_CHARS = 6000
WINDOW_LINES = 100  # lines one view shows at most
HEAD_LINES = 30  # lines shown after a big file's outline
OUTLINE_ENTRIES = 50  # definitions in a big file's outline, at most
VIEW_LINE_CHARS = 300  # characters per viewed line, at most
VIEW_CHARS = 6000  # characters of one window, at most (its lines are cut short of it)
AROUND = 10  # lines shown before PATH:LINE
MAX_LISTED = 40  # files named when a path does not exist, at most


def numbered(lines: list[str], start: int = 1) -> str:
    """``lines`` (with their line ends) as ``view`` shows them: a right-aligned number and ``| ``."""
    return "".join(f"{n:4d}| {line}" for n, line in enumerate(lines, start))


def cut_line(line: str, limit: int = VIEW_LINE_CHARS) -> str:
    """``line`` (without its line end) cut to ``limit`` characters, marked when cut."""
    line = line.rstrip("\r\n")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def numbered_cut(lines: list[str], start: int = 1) -> str:
    """``lines`` numbered as ``view`` shows them, each cut to ``VIEW_LINE_CHARS`` characters."""
    return "".join(f"{n:4d}| {cut_line(line)}\n" for n, line in enumerate(lines, start))


def definitions(text: str) -> list[tuple[int, int, int, str, str]] | None:
    """``(first line, last line, depth, kind, name)`` of the module's top-level classes and functions
    and of the methods of its top-level classes (depth 1, named ``Class.method``), in line order;
    ``kind`` is "class" or "def". None when ``text`` is not Python that parses."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node.lineno, node.end_lineno or node.lineno, 0, "def", node.name))
        elif isinstance(node, ast.ClassDef):
            found.append((node.lineno, node.end_lineno or node.lineno, 0, "class", node.name))
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append((sub.lineno, sub.end_lineno or sub.lineno, 1, "def", f"{node.name}.{sub.name}"))
    return found


def view(path: str, text: str, start: int = 0, end: int = 0) -> str:
    """What ``view_file`` shows of the file (see the module docstring)."""
    lines = text.splitlines(keepends=True)
    n = len(lines)
    if n == 0:
        return f"{path} is empty.\n"
    if start <= 0 and end <= 0:
        if n <= WHOLE_FILE_LINES and len(text) <= WHOLE_FILE_CHARS:
            return numbered_cut(lines)
        return big_file(path, text, lines)
    if start <= 0:
        start = max(1, end - WINDOW_LINES + 1)
    if end <= 0:
        end = start + WINDOW_LINES - 1
    if end < start:
        start, end = end, start
    if start > n:
        return f"{path} has only {n} lines: ask for lines within 1-{n}.\n"
    end, asked = min(end, n), end
    note = ""
    if end - start + 1 > WINDOW_LINES:
        end, note = start + WINDOW_LINES - 1, f" (at most {WINDOW_LINES} lines at a time)"
    used = 0
    for k in range(start, end + 1):
        used += len(cut_line(lines[k - 1])) + 7
        if used > VIEW_CHARS and k > start:
            end, note = k - 1, f" (at most {VIEW_CHARS} characters at a time)"
            break
    out = f"{path}, lines {start}-{end} of {n}{note}:\n" + numbered_cut(lines[start - 1:end], start)
    if end < n:
        out += f"(More: view_file {path} with start_line={end + 1}.)\n"
    elif asked > n:
        out += "(End of file.)\n"
    return out


def big_file(path: str, text: str, lines: list[str]) -> str:
    """A big file without a window: its outline, its first lines and how to ask for more."""
    out = [f"{path} has {len(lines)} lines, too many to show at once."]
    defs = definitions(text) if path.endswith(".py") else None
    if defs:
        if len(defs) > OUTLINE_ENTRIES:  # methods go first, then the outline is cut
            defs = [d for d in defs if d[2] == 0] if sum(1 for d in defs if d[2] == 0) <= OUTLINE_ENTRIES else defs
        out.append("Its classes and functions (line: definition):")
        out.extend(f"{d[0]:4d}| {cut_line(lines[d[0] - 1], LINE_CHARS)}" for d in defs[:OUTLINE_ENTRIES])
        if len(defs) > OUTLINE_ENTRIES:
            out.append(f"      ... ({len(defs) - OUTLINE_ENTRIES} more definitions)")
    head = min(HEAD_LINES, len(lines))
    out.append(f"Lines 1-{head}:")
    out.append(numbered_cut(lines[:head]).rstrip("\n"))
    out.append(f"To see more, call view_file with start_line and end_line (at most {WINDOW_LINES} lines at a "
               f"time), e.g. start_line={head + 1}, end_line={min(len(lines), head + 60)}.")
    return "\n".join(out) + "\n"


def tree_files(root: str, limit: int = MAX_LISTED) -> list[str]:
    """Up to ``limit`` files under ``root`` (hidden and ``__pycache__`` entries skipped), sorted."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        found += [os.path.normpath(os.path.join(folder, f)) for f in sorted(files) if not f.startswith(".")]
        if len(found) >= limit:
            break
    return sorted(found)[:limit]


def missing(path: str) -> str:
    """The observation for a path that is not a file: the files of its nearest existing folder and the
    paths in the tree most like it (what the model probably meant)."""
    folder = os.path.dirname(os.path.normpath(path))
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    listed = tree_files(folder or ".")
    lines = [f"No file {path!r}. Nothing changed."]
    like = difflib.get_close_matches(os.path.normpath(path), tree_files("."), n=3, cutoff=0.5)
    if like:
        lines.append("Did you mean: " + ", ".join(like) + "?")
    lines.append(f"Files in {folder or '.'}: " + ", ".join(listed) + ("" if len(listed) < MAX_LISTED else ", ..."))
    return "\n".join(lines)
