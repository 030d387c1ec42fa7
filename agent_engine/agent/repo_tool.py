"""The program behind the repository-wide tools: it runs INSIDE the sandbox, after the other tool sources.

``agent_engine.agent.aci.tool_program`` runs ``text_match``'s, ``file_tool``'s, ``failing_code``'s,
``repair_tool``'s and ``mutant_screen``'s sources and then this one in one namespace (named
``SANDBOX_NAMESPACE``) as ``python3 -I -B -c PROGRAM ARG``, ARG being base64 JSON ``{"op", ...}``; this
``main`` answers ``map``, ``search``, ``failing_code`` (``agent_engine.agent.failing_code``),
``suspects``, ``failing_tests`` and ``rewrite`` (``agent_engine.agent.repair_tool``), ``screen_mutants``
(``agent_engine.agent.mutant_screen``) and the ``view`` of a folder, and hands every other op to
``file_tool``'s. What it prints is the observation. Importing it runs nothing; it needs nothing but the
standard library.

Invariants:
- ``map`` (the repository map, after Aider's): every file under the folder in path order, except
  hidden, cache and build folders; for each Python module that is not a test, its top-level classes
  (with their methods) and functions with their line numbers (``ast``). Test files are summarized
  per test folder (count and first names); read-only files (the task's check) are marked. The map
  fits ``budget`` characters: past it, modules lose their methods, then their definitions (except at
  most ``FOCUSED_MODULES`` modules whose name or top-level names the task's words name), then folders
  two levels and then one level deep are folded into one line each (file count, first names; not the
  folders of focused modules), then the list is cut with a note saying how many lines it leaves out. Work is bounded: ``MAX_FILES`` paths walked, ``MAX_PARSED`` modules parsed, none
  larger than ``PARSE_BYTES``, ``MAP_SECONDS`` of parsing.
- After the map, the numbered source of small modules (at most ``SOURCE_LINES`` lines each,
  ``SOURCE_CHARS`` characters in all, within what the budget leaves): the writable ones the task's
  words name or, when it names none and the repository has at most ``FEW_MODULES`` writable modules,
  those; never a read-only file.
- ``search`` matches a pattern line by line over the repository's text files (library code first,
  then tests): as a regex when it compiles and matches, else as literal text, else case-insensitively;
  the observation says which. At most ``SEARCH_MATCHES`` matches of ``LINE_CHARS`` characters are
  shown (and how many more there are); binary files (a NUL byte) and files over ``SEARCH_BYTES`` are
  skipped; exit status 1 when nothing matched.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import time

SANDBOX_NAMESPACE = "__agent_tool__"  # the module name the tool sources run under in the sandbox

if __name__ == SANDBOX_NAMESPACE:  # in the sandbox: the earlier tool sources ran first, in this namespace
    file_main = main  # noqa: F821
else:
    from agent_engine.agent.edit_undo import undo_last_edit
    from agent_engine.agent.failing_code import FAILURE_CHARS, PARSE_BYTES, failing_code
    from agent_engine.agent.file_tool import LINE_CHARS, is_test_path, read_only, read_text, skipped_dir
    from agent_engine.agent.file_tool import main as file_main
    from agent_engine.agent.file_view import cut_line, definitions, numbered_cut
    from agent_engine.agent.mutant_screen import screen_mutants
    from agent_engine.agent.repair_tool import (
        SUSPECT_LINES,
        SUSPECTS,
        failing_outcome,
        rewrite_function,
        suspects,
    )

MAP_CHARS = 2000  # the map's default budget
SOURCE_LINES = 60  # a module this short, named by the task (or one of few), is shown whole after the map
SOURCE_CHARS = 1600  # characters of such sources after the map, at most
FEW_MODULES = 4  # a repository with at most this many modules has its small ones shown whole even unnamed
MAX_FILES = 5000  # paths walked, at most
MAX_PARSED = 400  # modules parsed for the map, at most
MAP_SECONDS = 3.0  # time spent parsing for the map, at most
TEST_NAMES = 6  # test files named per test folder
FOCUSED_MODULES = 8  # modules the task's words name, kept in full detail, at most
FOLDER_FILES = 25  # a folder's other (non-Python) files past this many are counted, not listed
SEARCH_MATCHES = 30
SEARCH_BYTES = 1_000_000
REGEX_CHARS = re.compile(r"[.^$*+?{}\[\]\\|()]")


# --------------------------------------------------------------------------- walking the tree


def repo_files(root: str = ".") -> tuple[list[str], bool]:
    """``(paths, complete)``: the files under ``root`` (relative to the working folder), sorted, hidden
    and cache folders skipped, at most ``MAX_FILES`` (``complete`` False when there were more)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not skipped_dir(d))
        for f in sorted(files):
            if f.startswith(".") or f.endswith((".pyc", ".pyo")):
                continue
            found.append(os.path.normpath(os.path.join(folder, f)))
            if len(found) >= MAX_FILES:
                return sorted(found), False
    return sorted(found), True


# --------------------------------------------------------------------------- map


def module_lines(path: str, defs: list[tuple[int, int, int, str, str]] | None, level: int) -> list[str]:
    """A module's map lines at ``level``: 0 each definition on its line (a class with its methods), 1 one
    line with the top-level names, 2 the path only."""
    mark = " (read-only)" if read_only(path) else ""
    if not defs or level >= 2:
        return [path + mark]
    top = [d for d in defs if d[2] == 0]
    if level == 1:
        return [f"{path}{mark}: " + ", ".join(f"{'class ' if k == 'class' else ''}{n} {a}" for a, _, _, k, n in top)]
    out = [path + mark]
    for first, last, _, kind, name in top:
        line = f"{first:5d} {kind} {name}"
        if kind == "class":
            methods = [f"{d[4].split('.', 1)[1]} {d[0]}" for d in defs if d[2] == 1 and first <= d[0] <= last]
            line += (": " + ", ".join(methods)) if methods else ""
        out.append(line)
    return out


def test_groups(tests: list[str]) -> list[str]:
    """One line per test folder (or folder holding test files): how many files, the first names, and
    whether they are read-only."""
    groups: dict[str, list[str]] = {}
    for path in tests:
        parts = path.split(os.sep)
        cut = next((i for i, p in enumerate(parts[:-1]) if p in ("tests", "test", "testing")), len(parts) - 1)
        folder = os.sep.join(parts[:cut + 1]) if cut < len(parts) - 1 else (os.path.dirname(path) or ".")
        groups.setdefault(folder, []).append(path)
    out = []
    for folder, paths in sorted(groups.items()):
        names = [os.path.relpath(p, folder) if folder != "." else p for p in paths]
        mark = " (read-only)" if any(read_only(p) for p in paths) else ""
        shown = ", ".join(names[:TEST_NAMES]) + (", ..." if len(names) > TEST_NAMES else "")
        label = f"{folder}/" if folder != "." else "test files at the top"
        out.append(f"{label}{mark}: {len(paths)} test file(s): {shown}")
    return out


def repo_map(root: str = ".", budget: int = MAP_CHARS, focus: list[str] | tuple[str, ...] = ()) -> str:
    """The map of the tree under ``root`` within ``budget`` characters (see the module docstring)."""
    files, complete = repo_files(root)
    tests = [f for f in files if is_test_path(f)]
    code = [f for f in files if not is_test_path(f)]
    words = {w.lower() for w in focus}
    defs: dict[str, list[tuple[int, int, int, str, str]] | None] = {}
    focused: set[str] = set()
    deadline = time.monotonic() + MAP_SECONDS
    for path in code:
        if not path.endswith(".py") or len(defs) >= MAX_PARSED or time.monotonic() > deadline:
            continue
        text = read_text(path, PARSE_BYTES)
        defs[path] = definitions(text) if text is not None else None
        names = {os.path.splitext(os.path.basename(path))[0].lower()}
        names |= {d[4].lower() for d in defs[path] or () if d[2] == 0}
        if names & words and len(focused) < FOCUSED_MODULES:
            focused.add(path)
    others: dict[str, list[str]] = {}
    for path in code:
        if not path.endswith(".py"):
            others.setdefault(os.path.dirname(path), []).append(path)
    crowded = {d for d, paths in others.items() if len(paths) > FOLDER_FILES}
    tail = test_groups(tests)
    for level in range(5):
        lines = map_lines(code, defs, focused, crowded, others, level) + tail
        if sum(len(x) + 1 for x in lines) <= budget:
            break
    out, used = [], 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget - 80:
            out.append(f"... {len(lines) - i} more lines not shown (view_file FOLDER maps one folder).")
            break
        out.append(line)
        used += len(line) + 1
    if not complete:
        out.append(f"(Only the first {MAX_FILES} files were read.)")
    modules = [p for p in defs if not read_only(p)]
    named = sorted(p for p in focused if not read_only(p))
    text = "\n".join(out) + "\n" if out else "(no files)\n"
    room = min(SOURCE_CHARS, budget - len(text))
    return text + small_sources(named or (modules if len(modules) <= FEW_MODULES else []), room)


def small_sources(paths: list[str], room: int) -> str:
    """The numbered source of the first of ``paths`` that are small (at most ``SOURCE_LINES`` lines),
    within ``room`` characters in all: a small model reads the code it must fix at once."""
    out: list[str] = []
    used = 0
    for path in paths:
        text = read_text(path, SOURCE_CHARS)
        if text is None or read_only(path):
            continue
        lines = text.splitlines(keepends=True)
        block = f"\n{path}:\n" + numbered_cut(lines)
        if len(lines) > SOURCE_LINES or used + len(block) > room:
            continue
        out.append(block)
        used += len(block)
    return "".join(out)


def map_lines(code: list[str], defs: dict[str, list[tuple[int, int, int, str, str]] | None], focused: set[str],
              crowded: set[str], others: dict[str, list[str]], level: int) -> list[str]:
    """The code part of the map at ``level`` (focused modules at level 0): levels 0-2 as
    ``module_lines``; 3 and 4 also fold each folder two levels (then one level) deep into one line,
    except the folders that hold a focused module."""
    if level >= 3:
        return folded(code, 5 - level, defs, focused, crowded, others)
    lines = []
    for path in code:
        folder = os.path.dirname(path)
        if folder in crowded and not path.endswith(".py"):
            paths = others[folder]
            if path == paths[0]:
                names = ", ".join(os.path.basename(p) for p in paths[:3])
                lines.append(f"{folder or '.'}/: {len(paths)} other files ({names}, ...)")
            continue
        lines.extend(module_lines(path, defs.get(path), 0 if path in focused else level))
    return lines


def folded(code: list[str], depth: int, defs: dict[str, list[tuple[int, int, int, str, str]] | None],
           focused: set[str], crowded: set[str], others: dict[str, list[str]]) -> list[str]:
    """``code`` with each folder ``depth`` levels deep folded into one line; a folder holding a focused
    module is folded one level deeper instead (its own files listed)."""
    groups: dict[str, list[str]] = {}
    for path in code:
        parts = path.split(os.sep)
        groups.setdefault(os.sep.join(parts[:depth]) if len(parts) > depth else "", []).append(path)
    lines: list[str] = []
    for key, paths in groups.items():
        if not key or len(paths) == 1:
            lines += map_lines(paths, defs, focused, crowded, others, 2)
        elif focused.intersection(paths):
            lines += folded(paths, depth + 1, defs, focused, crowded, others)
        else:
            names = ", ".join(os.path.relpath(p, key) for p in paths[:3])
            lines.append(f"{key}/: {len(paths)} files ({names}{', ...' if len(paths) > 3 else ''})")
    return lines


# --------------------------------------------------------------------------- search


def search(pattern: str, root: str = ".") -> tuple[str, int]:
    """``(observation, exit status)`` of a search for ``pattern`` (see the module docstring)."""
    if not pattern.strip():
        return "search needs a pattern: a name or a piece of code to find.\n", 1
    files, _ = repo_files(root)
    files = [f for f in files if not is_test_path(f)] + [f for f in files if is_test_path(f)]
    texts = {}
    for path in files:
        text = read_text(path, SEARCH_BYTES)
        if text is not None:
            texts[path] = text
    attempts: list[tuple[re.Pattern[str], str]] = []
    try:
        attempts.append((re.compile(pattern), ""))
    except re.error:
        pass
    if not attempts or REGEX_CHARS.search(pattern):
        attempts.append((re.compile(re.escape(pattern)), " (as literal text)"))
    attempts.append((re.compile(re.escape(pattern), re.IGNORECASE), " (as literal text, ignoring case)"))
    for regex, how in attempts:
        hits, in_files = [], set()
        for path, text in texts.items():
            for no, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    in_files.add(path)
                    if len(hits) < SEARCH_MATCHES:
                        hits.append(f"{path}:{no}: {cut_line(line.strip(), LINE_CHARS)}")
                    else:
                        hits.append("")
        if hits:
            shown = [h for h in hits if h]
            head = f"{len(hits)} match(es) of {pattern!r}{how} in {len(in_files)} file(s):"
            more = (f"\n... {len(hits) - len(shown)} more matches not shown: make the pattern more specific."
                    if len(hits) > len(shown) else "")
            return head + "\n" + "\n".join(shown) + more + "\n", 0
    return f"No matches of {pattern!r} in {len(texts)} text files.\n", 1


# --------------------------------------------------------------------------- entry point


def main(argv: list[str]) -> int:
    """Run one op (argv[1]: base64 JSON); returns the exit status."""
    a = json.loads(base64.b64decode(argv[1]))
    op = a["op"]
    if op == "map" or (op == "view" and os.path.isdir(a.get("path", ""))):
        path = a.get("path") or "."
        print(repo_map(path, int(a.get("budget") or MAP_CHARS), a.get("focus") or ()), end="")
        return 0
    if op == "search":
        text, status = search(a["pattern"], a.get("path") or ".")
        print(text, end="")
        return status
    if op == "undo":
        return undo_last_edit()
    if op == "failing_code":
        print(failing_code(a["tracebacks"], int(a.get("chars") or FAILURE_CHARS)), end="")
        return 0
    if op == "suspects":
        found = suspects(a.get("argv") or [], a.get("failing") or [], a.get("tracebacks") or [],
                         int(a.get("limit") or SUSPECTS), int(a.get("max_lines") or SUSPECT_LINES),
                         str(a.get("output") or ""), str(a.get("issue") or ""),
                         int(a["leading"]) if a.get("leading") else None)
        print(json.dumps(found))
        return 0
    if op == "failing_tests":
        print(json.dumps(failing_outcome(a.get("argv") or [], a.get("failing") or [])))
        return 0
    if op == "screen_mutants":
        print(json.dumps(screen_mutants(a.get("argv") or [], a.get("failing") or [], int(a.get("ran") or 0),
                                        a.get("edits") or [], float(a["seconds"]), float(a["budget"]))))
        return 0
    if op == "rewrite":
        return rewrite_function(a["path"], int(a["first"]), int(a["last"]), a["old"], a["new"])
    return int(file_main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
