"""The program behind the repository-wide tools: it runs INSIDE the sandbox, after ``file_tool``'s source.

``agent_engine.agent.aci.tool_program`` runs ``agent_engine.agent.file_tool``'s source and then this
one in one namespace (named ``SANDBOX_NAMESPACE``) as ``python3 -I -c PROGRAM ARG``, ARG being base64
JSON ``{"op", ...}``; this ``main`` answers ``map``, ``search``, ``failing_code`` and the ``view`` of a
folder, and hands every other op to ``file_tool``'s. What it prints is the observation. Importing it
runs nothing; it needs nothing but the standard library.

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
- ``search`` matches a pattern line by line over the repository's text files (library code first,
  then tests): as a regex when it compiles and matches, else as literal text, else case-insensitively;
  the observation says which. At most ``SEARCH_MATCHES`` matches of ``LINE_CHARS`` characters are
  shown (and how many more there are); binary files (a NUL byte) and files over ``SEARCH_BYTES`` are
  skipped; exit status 1 when nothing matched.
- ``failing_code`` gets a command's tracebacks as ``[path, line]`` frames (outermost first, as Python
  prints them) and shows the repository code on the failing path: frames outside the repository (the
  standard library), in tests or in read-only files are not shown; the library functions the frames
  pass through, most frequent first, innermost first. When no frame is in a library function (an
  assertion failed in a test, or at a script's top level), the library functions the failing lines
  call and, less surely, the rest of the failing test calls (resolved through the test module's
  imports and a package's re-exports; ``obj.method()`` through the classes it imports), then the
  functions that a short one (``SHORT_FUNCTION`` lines) calls, ranked by how many failures reach them. At most ``FAILING_FUNCTIONS`` functions, each at most ``FUNCTION_LINES`` numbered lines
  (a window around the failing line), ``FAILURE_CHARS`` characters in all (or the budget given; the
  first function is always shown whole); nothing printed when there is nothing to show.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import sys
import time

SANDBOX_NAMESPACE = "__agent_tool__"  # the module name the two sources run under in the sandbox

if __name__ == SANDBOX_NAMESPACE:  # in the sandbox: file_tool's source ran first, in this namespace
    file_main = main  # noqa: F821
else:
    from agent_engine.agent.file_tool import (
        LINE_CHARS,
        cut_line,
        definitions,
        is_test_path,
        read_only,
        skipped_dir,
    )
    from agent_engine.agent.file_tool import main as file_main

MAP_CHARS = 2000  # the map's default budget
MAX_FILES = 5000  # paths walked, at most
MAX_PARSED = 400  # modules parsed for the map, at most
PARSE_BYTES = 400_000  # a larger module is listed without its definitions
MAP_SECONDS = 3.0  # time spent parsing for the map, at most
TEST_NAMES = 6  # test files named per test folder
FOCUSED_MODULES = 8  # modules the task's words name, kept in full detail, at most
FOLDER_FILES = 25  # a folder's other (non-Python) files past this many are counted, not listed
SEARCH_MATCHES = 30
SEARCH_BYTES = 1_000_000
FAILING_FUNCTIONS = 4
FUNCTION_LINES = 40
SHORT_FUNCTION = 12  # a function this short has its callees shown too (it is a wrapper)
FAILURE_CHARS = 2600
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
    return "\n".join(out) + "\n" if out else "(no files)\n"


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


# --------------------------------------------------------------------------- failing code


class Source:
    """A parsed module of the repository: its lines and syntax tree (None when it does not parse)."""

    def __init__(self, path: str) -> None:
        self.path = path
        text = read_text(path, PARSE_BYTES) or ""
        self.lines = text.splitlines()
        try:
            self.tree: ast.Module | None = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.tree = None
        self._functions: list[tuple[str, ast.AST]] | None = None

    def functions(self) -> list[tuple[str, ast.AST]]:
        """``(qualified name, node)`` of every function and class, at any depth."""
        if self._functions is None:
            found: list[tuple[str, ast.AST]] = []
            stack: list[tuple[str, ast.AST]] = [("", self.tree)] if self.tree is not None else []
            while stack:
                prefix, node = stack.pop()
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        found.append((prefix + child.name, child))
                        stack.append((prefix + child.name + ".", child))
                    elif not isinstance(child, ast.expr):
                        stack.append((prefix, child))
            self._functions = found
        return self._functions

    def enclosing(self, line: int) -> tuple[str, ast.AST] | None:
        """The innermost function holding ``line`` (None: module level)."""
        holding = [(n, f) for n, f in self.functions() if not isinstance(f, ast.ClassDef)
                   and f.lineno <= line <= (f.end_lineno or f.lineno)]
        return max(holding, key=lambda nf: nf[1].lineno) if holding else None

    def top_level(self, name: str) -> ast.AST | None:
        for node in self.tree.body if self.tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return node
        return None

    def statement_at(self, line: int) -> ast.AST | None:
        """The smallest statement holding ``line``."""
        best = None
        for node in ast.walk(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or (node.end_lineno or 0) - node.lineno <= (best.end_lineno or 0) - best.lineno:
                    best = node
        return best


class FailingCode:
    """Finds and shows the library code on the failing path (see the module docstring)."""

    def __init__(self, chars: int = FAILURE_CHARS) -> None:
        self.chars = chars
        self.root = os.path.realpath(".")
        self.sources: dict[str, Source] = {}

    def source(self, path: str) -> Source:
        if path not in self.sources:
            self.sources[path] = Source(path)
        return self.sources[path]

    def inside(self, path: str) -> str | None:
        """``path`` relative to the repository when it is a Python file in it, else None."""
        real = os.path.realpath(path)
        if not real.startswith(self.root + os.sep) or not real.endswith(".py") or not os.path.isfile(real):
            return None
        rel = os.path.relpath(real, self.root)
        return None if any(skipped_dir(p) for p in rel.split(os.sep)[:-1]) else rel

    def library(self, path: str) -> bool:
        return not is_test_path(path) and not read_only(path)

    def show(self, tracebacks: list[list[list[object]]]) -> str:
        counts: dict[tuple[str, str], list[object]] = {}
        test_frames: list[list[tuple[str, int]]] = []
        for tb in tracebacks:
            test_frames.append([])
            for order, frame in enumerate(reversed(tb)):  # innermost first
                rel = self.inside(str(frame[0]))
                line = int(frame[1]) if str(frame[1]).isdigit() else 0
                if rel is None or line <= 0:
                    continue
                if not self.library(rel):
                    test_frames[-1].append((rel, line))
                    continue
                found = self.source(rel).enclosing(line)
                if found is None:  # a script's own line (a check): what it calls is what failed
                    test_frames[-1].append((rel, line))
                    continue
                entry = counts.setdefault((rel, found[0]), [0, order, line, found[1]])
                entry[0] = int(entry[0]) + 1  # type: ignore[call-overload]
        if counts:
            ranked = sorted(counts.items(), key=lambda kv: (-int(kv[1][0]), kv[1][1]))  # type: ignore[call-overload]
            parts = [self.function_text(rel, name, node, f"the failure passes line {line}", int(line))
                     for (rel, name), (_, _, line, node) in ranked[:FAILING_FUNCTIONS]]
            return self.joined("The library code on the failing path (innermost first; tests are read-only, "
                               "fix this code):", parts)
        return self.called_by_tests(test_frames)

    def called_by_tests(self, tracebacks: list[list[tuple[str, int]]]) -> str:
        """The library functions the failing tests' lines call, and those short ones call in turn, ranked
        by how many failures reach them (then shallowest, then first seen)."""
        # (path, name) -> [failures reaching it, depth, from another module, seen, node, why]
        reach: dict[tuple[str, str], list[object]] = {}
        for frames in tracebacks:
            reached: set[tuple[str, str]] = set()
            queue: list[tuple[str, str, ast.AST, str, int, bool]] = []
            for rel, line in frames:
                queue += [(p, n, node, f"called by {rel}:{line}", 0, False)
                          for p, n, node in self.calls_in_test(rel, line)]
            if frames:  # the rest of the failing test: the calls that set up what its assertion saw
                rel, line = frames[0]
                queue += [(p, n, node, f"called in the test at {rel}:{line}", 1, False)
                          for p, n, node in self.calls_in_test(rel, line, whole=True)]
            while queue:
                path, name, node, why, depth, foreign = queue.pop(0)
                if (path, name) in reached or len(reached) >= 4 * FAILING_FUNCTIONS:
                    continue
                reached.add((path, name))
                entry = reach.setdefault((path, name), [0, depth, foreign, len(reach), node, why])
                entry[0] = int(entry[0]) + 1  # type: ignore[call-overload]
                if depth < 3 and (node.end_lineno or node.lineno) - node.lineno + 1 <= SHORT_FUNCTION:
                    queue += [(p, n, callee, f"called by {name}", depth + 1, p != path)
                              for p, n, callee in self.callees(path, node)]
        ranked = sorted(reach.items(), key=lambda kv: (-int(kv[1][0]), kv[1][1], kv[1][2], kv[1][3]))  # type: ignore[call-overload]
        parts = [self.function_text(p, n, e[4], str(e[5])) for (p, n), e in ranked[:FAILING_FUNCTIONS]]  # type: ignore[arg-type]
        return self.joined("The failing tests call this library code (tests are read-only, fix this code):", parts)

    def joined(self, header: str, parts: list[str]) -> str:
        out, used = [], len(header)
        for part in parts:
            if out and used + len(part) > self.chars:
                break
            out.append(part)
            used += len(part)
        return header + "\n" + "".join(out) if out else ""

    def function_text(self, path: str, name: str, node: ast.AST, why: str, line: int = 0) -> str:
        lines = self.source(path).lines
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        last = node.end_lineno or node.lineno
        lo, hi = first, last
        if last - first + 1 > FUNCTION_LINES:
            lo = max(first, min(line - FUNCTION_LINES * 2 // 3, last - FUNCTION_LINES + 1)) if line else first
            hi = min(last, lo + FUNCTION_LINES - 1)
        text = "".join(f"{n:4d}| {cut_line(x, LINE_CHARS)}\n" for n, x in enumerate(lines[lo - 1:hi], lo))
        more = f"      ... (to line {last})\n" if hi < last else ""
        kind = "class" if isinstance(node, ast.ClassDef) else "def"
        return f"{path}, {kind} {name} (lines {first}-{last}), {why}:\n{text}{more}"

    # resolving what a test line calls

    def module_file(self, module: str, level: int, here: str) -> str | None:
        """The repository file of ``module`` as imported from ``here`` (a module or package), or None."""
        parts = module.split(".") if module else []
        bases = [os.path.dirname(here)] if level else [".", os.path.dirname(here)]
        if level:
            for _ in range(level - 1):
                bases = [os.path.dirname(bases[0])]
        for base in bases:
            stem = os.path.join(base, *parts) if parts else base
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                rel = self.inside(candidate)
                if rel is not None:
                    return rel
        return None

    def resolve(self, path: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """Where ``name`` as seen in module ``path`` is defined: the module defines it, or imports it
        from a repository module (followed up to 4 times)."""
        src = self.source(path)
        node = src.top_level(name)
        if node is not None:
            return path, node
        if depth >= 4 or src.tree is None:
            return None
        for stmt in src.tree.body:
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        target = self.module_file(stmt.module or "", stmt.level, path)
                        if target is not None and target != path:
                            return self.resolve(target, alias.name, depth + 1)
        return None

    def calls_in_test(self, rel: str, line: int, whole: bool = False) -> list[tuple[str, str, ast.AST]]:
        """The library functions (path, qualified name, node) the statement at ``rel:line`` calls (with
        ``whole``: the function holding that line)."""
        src = self.source(rel)
        holder = src.enclosing(line) if whole else None
        stmt = holder[1] if holder is not None else src.statement_at(line)
        if stmt is None or src.tree is None:
            return []
        names: dict[str, tuple[str, int, str]] = {}
        modules: dict[str, str] = {}
        for node in ast.walk(src.tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    names[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    modules[alias.asname or alias.name] = alias.name
                    modules.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
        found: list[tuple[str, str, ast.AST]] = []
        calls = sorted((n for n in ast.walk(stmt) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            dotted = dotted_name(call.func)
            if dotted is None or dotted[0] in ("self", "cls"):
                continue
            hit = self.resolve_call(rel, dotted, names, modules)
            if hit is not None and self.library(hit[0]) and hit not in found:
                found.append(hit)
        return found

    def resolve_call(self, rel: str, dotted: list[str], names: dict[str, tuple[str, int, str]],
                     modules: dict[str, str]) -> tuple[str, str, ast.AST] | None:
        head, last = dotted[0], dotted[-1]
        if len(dotted) == 1 and head in names:
            module, level, original = names[head]
            where = self.module_file(module, level, rel)
            got = self.resolve(where, original) if where else None
            if got is not None and not isinstance(got[1], ast.ClassDef):
                return got[0], original, got[1]
            return None
        if len(dotted) >= 2:
            module = ".".join(dotted[:-1])
            where = self.module_file(modules[module], 0, rel) if module in modules else None
            if where is None and head in names and len(dotted) == 2:  # ``from pkg import mod``; ``mod.f()``
                mod, level, original = names[head]
                where = self.module_file(f"{mod}.{original}" if mod else original, level, rel)
            if where is not None:
                got = self.resolve(where, last)
                return (got[0], last, got[1]) if got is not None else None
            for mod, level, original in names.values():  # ``obj.method()``: the imported classes
                where = self.module_file(mod, level, rel)
                got = self.resolve(where, original) if where else None
                if got is not None and isinstance(got[1], ast.ClassDef):
                    method = method_of(got[1], last)
                    if method is not None:
                        return got[0], f"{got[1].name}.{last}", method
        return None

    def callees(self, path: str, node: ast.AST) -> list[tuple[str, str, ast.AST]]:
        """The library functions a function calls: names its module defines or imports, and methods of
        the classes its module defines."""
        src, found = self.source(path), []
        classes = [n for n in (src.tree.body if src.tree is not None else ()) if isinstance(n, ast.ClassDef)]
        calls = sorted((n for n in ast.walk(node) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            dotted = dotted_name(call.func)
            if dotted is None:
                continue
            hit: tuple[str, str, ast.AST] | None = None
            if len(dotted) == 1:
                got = self.resolve(path, dotted[0])
                if got is not None and not isinstance(got[1], ast.ClassDef):
                    hit = (got[0], dotted[0], got[1])
            else:
                for cls in classes:
                    method = method_of(cls, dotted[-1])
                    if method is not None:
                        hit = (path, f"{cls.name}.{dotted[-1]}", method)
                        break
            if hit is not None and self.library(hit[0]) and hit not in found:
                found.append(hit)
        return found


def dotted_name(node: ast.AST) -> list[str] | None:
    """``a.b.c`` of a called expression as ``["a", "b", "c"]``; None when it is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def method_of(cls: ast.ClassDef, name: str) -> ast.AST | None:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def failing_code(tracebacks: list[list[list[object]]], chars: int = FAILURE_CHARS) -> str:
    """The library code on the failing path of ``tracebacks`` in about ``chars`` characters (see the
    module docstring); "" for none."""
    return FailingCode(chars).show(tracebacks)


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
    if op == "failing_code":
        print(failing_code(a["tracebacks"], int(a.get("chars") or FAILURE_CHARS)), end="")
        return 0
    return int(file_main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
