"""The program behind the file tools: it runs INSIDE the sandbox, as ``python3 -I -B -c PROGRAM ARG``.

``agent_engine.agent.aci`` runs this file's source (after ``agent_engine.agent.text_match``'s, where an
edit's old text stands, and ``agent_engine.agent.file_view``'s, what a view shows, and before
``agent_engine.agent.repo_tool``'s, in one namespace: see ``aci.tool_program``) in the sandbox's
``python3`` with one argument, base64 JSON ``{"op", "path", ...}``; what it prints is the observation, its exit status the tool's. Importing it
runs nothing; it needs nothing but the standard library.

Invariants:
- ``view`` shows a file as ``agent_engine.agent.file_view`` does (bounded windows, a big file's
  outline); ``PATH:LINE`` (as ``search`` and tracebacks print) views a window around that line, and a
  path that does not exist gets ``file_view.missing``'s listing.
- ``edit`` writes the file only when ``old`` occurs exactly once: verbatim, else line by line with
  leading and trailing blanks ignored (``new`` is then re-indented to the first matched line's
  indentation), each tried again without line numbers when every line of ``old`` carries a
  ``view``-style number. Otherwise nothing is written and the observation says why and what the model
  probably meant: the line numbers of each occurrence (``old`` occurs several times), or the lines
  that equal ``old`` but for whitespace, or the ``difflib`` closest window of the file's lines (when
  at least ``MIN_SIMILARITY`` similar). Every failure observation is bounded (``SHOW_LINES`` lines of
  at most ``LINE_CHARS`` characters), and so is the search, whatever the sizes of the file and ``old``.
- When ``old`` is not found so, but its non-blank lines occur in the file in order, each equal but for
  surrounding blanks, at most ``MAX_GAP`` lines apart and in exactly one place (the model left out a
  docstring or a comment between them), the edit is applied as the line diff from ``old`` to ``new``
  on the lines ``old`` names (``gapped_edit``): a changed run of ``old``'s lines must be adjacent in
  the file, the lines ``old`` left out stay, and the observation says the match was not exact and
  shows the result. Anything less certain writes nothing.
- ``lines`` replaces lines ``start``..``end`` (1-based, inclusive; ``end = start - 1`` inserts before
  ``start``) by ``new``; numbers outside the file change nothing and say the file's length. ``new``
  copied with ``view``'s line numbers is taken without them, and ``new`` whose lines all start left
  of the replaced lines' indentation while it has none is re-indented to it (the observation says so).
- A ``lines`` edit that would break the file's syntax, whose new lines each rewrite one of the
  replaced lines (``aligned_rewrite``: similar text, in order), or whose one new line rewrites exactly
  one line within ``NEAR_LINES`` of them (``nearby_rewrite``), rewrites only those lines when that
  compiles, and says so; otherwise it is refused as below.
- An edit whose result is the file as it was writes nothing and fails, saying so.
- No edit leaves a file worse than it found it: an edit of a ``.py`` file that compiled before and
  would not after is refused (the error and the lines it would have produced are shown); a file with
  no write bit (a task's check files) is never written, even by root, and the refusal names the
  repository's writable Python modules, the code to fix instead.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import sys

if __name__.startswith("agent_engine."):  # on the host; in the sandbox the earlier sources ran first
    from agent_engine.agent.edit_undo import save_undo
    from agent_engine.agent.file_view import AROUND, WINDOW_LINES, missing, numbered, numbered_cut, view
    from agent_engine.agent.text_match import (
        LINE_CHARS,
        MIN_SIMILARITY,
        aligned_rewrite,
        closest,
        gapped_edit,
        indent_of,
        locate,
        nearby_rewrite,
        occurrences,
        variants,
        whitespace_match,
    )

SHOW_LINES = 12  # lines shown after a failed edit, at most
CONTEXT = 1  # lines shown around the closest window
NEAR_LINES = 8  # a one-line edit that breaks the file may land on a line this close that it rewrites
LIBRARY_LISTED = 8  # writable modules named when a read-only file is refused, at most
LINE_SUFFIX = re.compile(r"^(.+?):([0-9]+)(?:-([0-9]+))?:?$")
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})
TEST_DIRS = frozenset({"tests", "test", "testing"})


def shown(lines: list[str], first: int) -> str:
    """At most ``SHOW_LINES`` of ``lines`` (without line ends), numbered from ``first``, each cut to
    ``LINE_CHARS`` characters, one per line."""
    out = []
    for n, line in enumerate(lines[:SHOW_LINES], first):
        cut = line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 3] + "..."
        out.append(f"{n:4d}| {cut}\n")
    if len(lines) > SHOW_LINES:
        out.append(f"      ... ({len(lines) - SHOW_LINES} more lines)\n")
    return "".join(out)


def is_test_path(path: str) -> bool:
    """Whether ``path`` (relative) is a test file or lies in a test folder."""
    parts = os.path.normpath(path).split(os.sep)
    name = parts[-1]
    return (any(p in TEST_DIRS for p in parts[:-1]) or name.startswith("test_") or name.endswith("_test.py")
            or name == "conftest.py")


def read_only(path: str) -> bool:
    """Whether the file has no write bit at all (the task's check files): true even for root."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode) & 0o222 == 0
    except OSError:
        return False


def skipped_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info")


def library_files(limit: int = LIBRARY_LISTED) -> list[str]:
    """Up to ``limit`` writable Python modules of the repository that are not tests, sorted: the code a
    task asks to fix."""
    found: list[str] = []
    for folder, dirs, files in os.walk("."):
        dirs[:] = sorted(d for d in dirs if not skipped_dir(d))
        for f in sorted(files):
            path = os.path.normpath(os.path.join(folder, f))
            if f.endswith(".py") and not is_test_path(path) and not read_only(path):
                found.append(path)
        if len(found) >= limit:
            break
    return sorted(found)[:limit]


def read_only_refusal(path: str) -> str:
    """Why nothing was written to the read-only ``path``, and which files to fix instead."""
    code = library_files()
    where = (f"Fix the library's code instead: {', '.join(code)}" + (", ..." if len(code) >= LIBRARY_LISTED else "")
             + " (view_file . shows each module's classes and functions).") if code else \
        "Fix the code the check tests instead."
    return f"{path} is read-only: it is part of the task's check, so nothing changed. {where}"


def syntax_error(path: str, text: str) -> SyntaxError | None:
    """The syntax error of ``text`` as the Python module ``path`` (None: it compiles, or it is not a
    ``.py`` file)."""
    if not path.endswith(".py"):
        return None
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        return e
    except (ValueError, RecursionError, MemoryError) as e:  # a null byte; absurd nesting
        return SyntaxError(str(e))
    return None


def breaks_syntax(path: str, before: str, after: str) -> str | None:
    """The refusal when ``after`` does not compile while ``before`` did (None: the edit may go)."""
    error = syntax_error(path, after)
    if error is None or syntax_error(path, before) is not None:
        return None
    line = error.lineno or 1
    lines = after.splitlines()
    lo, hi = max(1, line - 3), min(len(lines), line + 3)
    return (f"Nothing changed: the edit would break {path}'s syntax ({error.msg} at line {line} of the "
            f"result). The result would have read:\n" + shown(lines[lo - 1:hi], lo)
            + "Check new_text's indentation and brackets, then try again.\n")


def not_found(path: str, text: str, old: str) -> str:
    """Why ``old`` could not be placed in ``text``, and what the model probably meant (bounded)."""
    lines = text.splitlines()
    if not old.strip():
        return f"old_text was not found in {path}: it is blank. Give the exact lines to replace. Nothing changed.\n"
    where = occurrences(text, old)
    if where:
        at = ", ".join(str(n) for n in where[:10]) + (" ..." if len(where) > 10 else "")
        return (f"old_text occurs {len(where)} times in {path} (at lines {at}). Nothing changed. Give more "
                "lines around the one to change, so that old_text occurs once.\n")
    head = f"old_text was not found in {path}. Nothing changed.\n"
    match = whitespace_match(text, old)
    if match is not None:
        first, last = match
        return (head + f"Lines {first}-{last} of {path} match old_text except for whitespace (spaces, tabs, "
                "blank lines or line breaks). Copy old_text from them exactly as shown here:\n"
                + shown(lines[first - 1:last], first))
    if not lines:
        return head + f"{path} is empty.\n"
    similarity, first, last = closest(text, old)
    if similarity < MIN_SIMILARITY:
        return head + f"No lines of {path} resemble old_text: is it the right file? view_file shows it.\n"
    lo, hi = max(1, first - CONTEXT), min(len(lines), last + CONTEXT)
    return (head + f"The closest lines of {path} are {first}-{last} ({similarity:.0%} similar); they read:\n"
            + shown(lines[lo - 1:hi], lo)
            + "If these are the lines to change, copy old_text from them exactly.\n")


def edit(path: str, text: str, old: str, new: str) -> int:
    """Replace ``old`` by ``new`` in the file (see the module docstring); prints the observation."""
    start, end, indent = locate(text, old) if old.strip() else (None, 0, None)
    if start is None:
        gapped = gapped_edit(text, old, new) if old.strip() else None
        if gapped is None:
            print(not_found(path, text, old), end="")
            return 1
        return write_gapped(path, text, *gapped)
    if indent is not None:
        body = new.strip("\n").splitlines()
        base = min((len(x) - len(x.lstrip()) for x in body if x.strip()), default=0)
        new = "".join(indent + x[base:] + "\n" if x.strip() else "\n" for x in body)
    result = text[:start] + new + text[end:]
    if not written(path, text, result):
        return 1
    lines = result.splitlines(keepends=True)
    first = result[:start].count("\n")
    last = first + max(1, new.count("\n") + (0 if new.endswith("\n") else 1))
    lo = max(0, first - 2)
    print(f"Edited {path}. Lines {lo + 1}-{min(len(lines), last + 2)} now read:")
    print(numbered(lines[lo:last + 2], lo + 1), end="")
    print(moved(len(text.splitlines()), len(lines), last), end="")
    return 0


def moved(before: int, after: int, last: int) -> str:
    """The note that an edit moved the lines after line ``last`` (1-based), "" when it did not."""
    shift = after - before
    if shift == 0 or last >= after:
        return ""
    return f"(Lines after {last} moved by {shift:+d}: line numbers from earlier views are stale.)\n"


def written(path: str, before: str, text: str) -> bool:
    """Write ``text`` (the file read ``before``) to ``path``; False, after saying why, when the file is
    read-only or the edit would break its syntax."""
    refusal = read_only_refusal(path) + "\n" if read_only(path) else breaks_syntax(path, before, text)
    if refusal is None and text == before:
        refusal = (f"Nothing changed: {path} already reads so (the new text is the text it replaces). "
                   "Change the wrong code itself.\n")
    if refusal is None:
        try:
            save_undo(path, before)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return True
        except PermissionError:
            refusal = read_only_refusal(path) + "\n"
    print(refusal, end="")
    return False


def write_gapped(path: str, before: str, text: str, first: int, last: int) -> int:
    """Write a ``gapped_edit`` result; prints what changed (or why nothing did)."""
    if not written(path, before, text):
        return 1
    lines = text.splitlines(keepends=True)
    lo, hi = max(0, first - 1), min(len(lines), last + 2)
    print(f"Edited {path}. old_text did not match exactly (the file has lines between the ones it gave, "
          f"which were kept); the change was applied to the lines it named. Lines {lo + 1}-{hi} now read:")
    print(numbered(lines[lo:hi], lo + 1), end="")
    return 0


def replace_lines(path: str, text: str, start: int, end: int, new: str) -> int:
    """Replace lines ``start``..``end`` of the file by ``new`` (see the module docstring); prints the
    observation."""
    lines = text.splitlines(keepends=True)
    n = len(lines)
    if start < 1 or start > n + 1 or end < start - 1:
        span = f"1-{n}" if n else "none: it is empty"
        print(f"Lines {start}-{end} are not lines of {path}: its lines are {span}. Give start_line <= end_line "
              "within the file (end_line = start_line - 1 inserts before start_line). Nothing changed.")
        return 1
    note = ""
    if end > n:
        note, end = f"(end_line {end} is past the end of the file: replaced up to line {n}.)\n", n
    body = variants(new)[-1] if new.strip() else ""
    new_lines = [x.rstrip("\r\n") for x in body.split("\n")] if body else []
    if new_lines and new_lines[-1] == "" and body.endswith("\n"):
        new_lines.pop()
    pad = min((indent_of(x) for x in lines[start - 1:end] if x.strip()), key=len, default="")
    new_indent = min((len(indent_of(x)) for x in new_lines if x.strip()), default=0)
    if new_indent == 0 and pad and any(x.strip() for x in new_lines):
        new_lines = [pad + x if x.strip() else x for x in new_lines]
        note += f"(new_text was re-indented by {len(pad)} to match the lines it replaces.)\n"
    result_lines = lines[:start - 1] + [x + "\n" for x in new_lines] + lines[end:]
    aligned = aligned_result(path, text, lines, start, end, new_lines)
    if aligned is not None:
        result_lines, start, end, new_lines, why = aligned
        note += why
    result = "".join(result_lines)
    if not written(path, text, result):
        return 1
    last = start - 1 + len(new_lines)
    lo, hi = max(0, start - 3), min(len(result_lines), max(last, start) + 2)
    what = f"Replaced lines {start}-{end}" if end >= start else f"Inserted before line {start}"
    print(f"{what} of {path} by {len(new_lines)} line(s). Lines {lo + 1}-{hi} now read:")
    print(numbered_cut(result_lines[lo:hi], lo + 1), end="")
    print(note + moved(n, len(result_lines), last), end="")
    return 0


def aligned_result(path: str, text: str, lines: list[str], start: int, end: int,
                   new_lines: list[str]) -> tuple[list[str], int, int, list[str], str] | None:
    """When replacing lines ``start``..``end`` by ``new_lines`` would break the file's syntax but each
    new line rewrites one of those lines (``aligned_rewrite``), or one new line rewrites exactly one
    line within ``NEAR_LINES`` of them (``nearby_rewrite``: the model named the wrong line), and
    rewriting only those compiles: the result, the span it changed, its new lines and a note saying
    so; else None."""
    literal = "".join(lines[:start - 1] + [x + "\n" for x in new_lines] + lines[end:])
    if breaks_syntax(path, text, literal) is None:
        return None
    lo, hi = max(1, start - NEAR_LINES), min(len(lines), max(end, start) + NEAR_LINES)
    for nearby, first_line, found in (
            (False, start, aligned_rewrite([x.rstrip("\r\n") for x in lines[start - 1:end]], new_lines)),
            (True, lo, nearby_rewrite([x.rstrip("\r\n") for x in lines[lo - 1:hi]], new_lines))):
        if found is None:
            continue
        pairs = [(first_line - start + k, line) for k, line in found]
        result = list(lines)
        for k, line in pairs:
            result[start - 1 + k] = line + "\n"
        if breaks_syntax(path, text, "".join(result)) is not None:
            continue
        first, last = start + pairs[0][0], start + pairs[-1][0]
        rewritten = ", ".join(str(start + k) for k, _ in pairs)
        if not nearby:
            kept = ", ".join(str(start + k) for k in range(end - start + 1) if k not in {k for k, _ in pairs})
            why = (f"(Replacing lines {start}-{end} by new_text alone would have broken the file; new_text "
                   f"rewrites line(s) {rewritten}, so only those were replaced and lines {kept} were kept.)\n")
        else:
            why = (f"(Replacing lines {start}-{end} by new_text would have broken the file; new_text rewrites "
                   f"line {rewritten} nearby, so line {rewritten} was replaced instead.)\n")
        return result, first, last, result[first - 1:last], why
    return None


def number(value: object) -> int:
    """A line number from the call's JSON (an int, or digits in a string); 0 when there is none."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return 0


def read_text(path: str, limit: int) -> str | None:
    """The file's text when it is at most ``limit`` bytes and not binary (no NUL byte), else None."""
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def main(argv: list[str]) -> int:
    """Run one ``view``, ``edit`` or ``lines`` (argv[1]: base64 JSON); returns the exit status."""
    a = json.loads(base64.b64decode(argv[1]))
    path, op = a["path"], a["op"]
    start, end = number(a.get("start")), number(a.get("end"))
    at = LINE_SUFFIX.match(path)
    if not os.path.exists(path) and at is not None and os.path.isfile(at.group(1)) and op == "view":
        path, line = at.group(1), int(at.group(2))  # ``parser.py:40`` as search and tracebacks print it
        start, end = max(1, line - AROUND), int(at.group(3) or line + WINDOW_LINES // 2)
    if os.path.isdir(path) and op != "view":
        print(f"{path} is a folder, not a file. Nothing changed.")
        return 1
    if os.path.isdir(path):
        names = sorted(os.path.join(r, f)[len(path):].lstrip("/") for r, _, fs in os.walk(path) for f in fs)
        print(f"{path} holds: " + ", ".join(n for n in names if "__pycache__" not in n))
        return 0
    if not os.path.isfile(path):
        print(missing(path))
        return 1
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        print(f"{path} is not a text file (not UTF-8). Nothing changed.")
        return 1
    if op == "view":
        print(view(path, text, start, end), end="")
        return 0
    if read_only(path):
        print(read_only_refusal(path))
        return 1
    if op == "lines":
        return replace_lines(path, text, start, end, a["new"])
    return edit(path, text, a["old"], a["new"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
