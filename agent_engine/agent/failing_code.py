"""The code on a failing path: the part of the repository tools that runs INSIDE the sandbox after a failing run.

``agent_engine.agent.aci.tool_program`` runs ``text_match``'s, ``file_tool``'s, this and ``repo_tool``'s
sources in one namespace; ``repo_tool``'s ``main`` answers the ``failing_code`` op with
``failing_code``. On the host, this module imports what it needs. Importing it runs nothing; it needs
nothing but the standard library (``ast``).

Invariants:
- ``failing_code`` gets a command's tracebacks as ``[path, line]`` frames (outermost first, as Python
  prints them) and shows the repository code on the failing path: frames outside the repository (the
  standard library), in tests or in read-only files are not shown; the library functions the frames
  pass through, most frequent first, innermost first. When no frame is in a library function (an
  assertion failed in a test, or at a script's top level), the library functions the failing lines
  call and, less surely, the rest of the failing test calls (resolved through the test module's
  imports and a package's re-exports; ``obj.method()`` through the classes it imports), then the
  functions that a short one (``SHORT_FUNCTION`` lines) calls, ranked by how many failures reach them;
  calling a class is calling its initializer, and the statements that assigned the names a failing
  line reads count as that line. Then the failing test's own lines (at most ``TEST_LINES``, up to its
  failing line) open the answer. At most ``FAILING_FUNCTIONS`` functions, each at most
  ``FUNCTION_LINES`` numbered lines (a window around the failing line; a docstring of more than
  ``DOCSTRING_LINES`` lines folded to its first line, the numbers of the rest kept), ``FAILURE_CHARS``
  characters in all (or the budget given; the first function is always shown); nothing printed when
  there is nothing to show.
"""

from __future__ import annotations

import ast
import os

if __name__.startswith("agent_engine."):  # on the host; in the sandbox the earlier sources ran here
    from agent_engine.agent.file_tool import LINE_CHARS, is_test_path, read_only, read_text, skipped_dir
    from agent_engine.agent.file_view import cut_line

FAILING_FUNCTIONS = 4
FUNCTION_LINES = 40
SHORT_FUNCTION = 20  # a function this short has its callees shown too (a wrapper, an initializer)
CONSTRUCTORS = ("__init__", "__post_init__", "__new__")  # what calling a class runs, first found shown
REST_OF_TEST_DEPTH = 2  # the rest of a failing test's calls rank after what the failing line's calls call
DOCSTRING_LINES = 3  # a longer docstring is shown as its first line and a note
TEST_LINES = 10  # lines of a failing test shown, at most (up to its failing line)
FAILURE_CHARS = 2600
PARSE_BYTES = 400_000  # a larger module is listed without its definitions


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
        frames, test_frames = self.frame_ranking(tracebacks)
        if frames:
            parts = [self.function_text(rel, name, node, f"the failure passes line {line}", line)
                     for rel, name, node, line in frames[:FAILING_FUNCTIONS]]
            return self.joined("The library code on the failing path (innermost first; tests are read-only, "
                               "fix this code):", parts)
        return self.called_by_tests(test_frames)

    def ranked(self, tracebacks: list[list[list[object]]]) -> list[tuple[str, str, ast.AST]]:
        """Every library function on the failing path as ``show`` ranks them: ``(path, qualified name,
        node)``, most telling first."""
        frames, test_frames = self.frame_ranking(tracebacks)
        if frames:
            return [(rel, name, node) for rel, name, node, _ in frames]
        return [(path, name, node) for path, name, node, _ in self.reach_ranking(test_frames)]

    def frame_ranking(self, tracebacks: list[list[list[object]]]
                      ) -> tuple[list[tuple[str, str, ast.AST, int]], list[list[tuple[str, int]]]]:
        """The library functions the frames pass through, most frequent then innermost first, as
        ``(path, name, node, line)``; and each traceback's frames in tests and scripts."""
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
        ranked = sorted(counts.items(), key=lambda kv: (-int(kv[1][0]), kv[1][1]))  # type: ignore[call-overload]
        return [(rel, name, node, int(line)) for (rel, name), (_, _, line, node) in ranked], test_frames  # type: ignore[misc]

    def called_by_tests(self, tracebacks: list[list[tuple[str, int]]]) -> str:
        """The failing test's lines and the library functions its failing lines call (``reach_ranking``)."""
        parts = [self.function_text(p, n, node, why) for p, n, node, why in self.reach_ranking(tracebacks)[:FAILING_FUNCTIONS]]
        first = next((frames[0] for frames in tracebacks if frames), None)
        test = self.test_text(*first) if first is not None else ""
        test = test if len(test) <= self.chars // 3 else ""  # the test's lines never crowd out the code
        shown = self.joined("The failing tests call this library code (tests are read-only, fix this code):", parts,
                            self.chars - len(test))
        return f"{test}{shown}" if shown else ""

    def reach_ranking(self, tracebacks: list[list[tuple[str, int]]]) -> list[tuple[str, str, ast.AST, str]]:
        """The library functions the failing tests' lines call, and those short ones call in turn, as
        ``(path, name, node, why)``, ranked by how many failures reach them (then shallowest, then first
        seen)."""
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
                queue += [(p, n, node, f"called in the test at {rel}:{line}", REST_OF_TEST_DEPTH, False)
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
        return [(p, n, e[4], str(e[5])) for (p, n), e in ranked]  # type: ignore[misc]

    def joined(self, header: str, parts: list[str], budget: int | None = None) -> str:
        """``header`` and as many of ``parts`` as fit ``budget`` characters (default ``self.chars``; the
        first part always)."""
        out, used, budget = [], len(header), self.chars if budget is None else budget
        for part in parts:
            if out and used + len(part) > budget:
                break
            out.append(part)
            used += len(part)
        return header + "\n" + "".join(out) if out else ""

    def function_text(self, path: str, name: str, node: ast.AST, why: str, line: int = 0) -> str:
        """``node``'s numbered lines (a long docstring folded to its first line; a long function to a
        ``FUNCTION_LINES`` window around ``line``), headed by where it is and why it is shown."""
        lines = self.source(path).lines
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        last = node.end_lineno or node.lineno
        folded = docstring_lines(node)
        numbers = [n for n in range(first, last + 1) if folded is None or not folded[0] < n <= folded[1]]
        if len(numbers) > FUNCTION_LINES:
            at = next((i for i, n in enumerate(numbers) if n >= line), 0) if line else 0
            lo = max(0, min(at - FUNCTION_LINES * 2 // 3, len(numbers) - FUNCTION_LINES))
            numbers = numbers[lo:lo + FUNCTION_LINES]
        out = []
        for n in numbers:
            out.append(f"{n:4d}| {cut_line(lines[n - 1], LINE_CHARS)}\n" if n <= len(lines) else "")
            if folded is not None and n == folded[0]:
                out.append(f"      ... (docstring to line {folded[1]})\n")
        more = f"      ... (to line {last})\n" if numbers and numbers[-1] < last else ""
        kind = "class" if isinstance(node, ast.ClassDef) else "def"
        return f"{path}, {kind} {name} (lines {first}-{last}), {why}:\n{''.join(out)}{more}"

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
        statements = [stmt] if whole else [*self.feeding(src, stmt, line), stmt]
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
        calls = sorted((n for st in statements for n in ast.walk(st) if isinstance(n, ast.Call)),
                       key=lambda c: (c.lineno, c.col_offset))
        for call in calls:
            dotted = dotted_name(call.func)
            if dotted is None or dotted[0] in ("self", "cls"):
                continue
            hit = self.resolve_call(rel, dotted, names, modules)
            if hit is not None and self.library(hit[0]) and hit not in found:
                found.append(hit)
        return found

    def feeding(self, src: Source, stmt: ast.AST, line: int) -> list[ast.AST]:
        """The statements before ``line`` in its function that assign a name the statement ``stmt`` reads
        (``pointer = JsonPointer('/~01')`` for ``assertEqual(pointer.parts, ...)``), nearest last."""
        holder = src.enclosing(line)
        if holder is None:
            return []
        read = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        feeding = []
        for node in ast.walk(holder[1]):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno < stmt.lineno:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                if names & read:
                    feeding.append(node)
        return sorted(feeding, key=lambda n: n.lineno)

    def test_text(self, rel: str, line: int) -> str:
        """The failing test's lines up to its failing line (at most ``TEST_LINES``), numbered; "" when the
        line is not in a function."""
        src = self.source(rel)
        holder = src.enclosing(line)
        if holder is None:
            return ""
        first = max(holder[1].lineno, line - TEST_LINES + 1)
        text = "".join(f"{n:4d}| {cut_line(x, LINE_CHARS)}\n" for n, x in enumerate(src.lines[first - 1:line], first))
        return f"The failing test, {rel} (read-only), lines {first}-{line}:\n{text}"

    def resolve_call(self, rel: str, dotted: list[str], names: dict[str, tuple[str, int, str]],
                     modules: dict[str, str]) -> tuple[str, str, ast.AST] | None:
        head, last = dotted[0], dotted[-1]
        if len(dotted) == 1 and head in names:
            module, level, original = names[head]
            where = self.module_file(module, level, rel)
            got = self.resolve(where, original) if where else None
            if got is not None and not isinstance(got[1], ast.ClassDef):
                return got[0], original, got[1]
            return constructor(got)
        if len(dotted) >= 2:
            module = ".".join(dotted[:-1])
            where = self.module_file(modules[module], 0, rel) if module in modules else None
            if where is None and head in names and len(dotted) == 2:  # ``from pkg import mod``; ``mod.f()``
                mod, level, original = names[head]
                where = self.module_file(f"{mod}.{original}" if mod else original, level, rel)
            if where is not None:
                got = self.resolve(where, last)
                if got is not None and isinstance(got[1], ast.ClassDef):
                    return constructor(got)
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


def docstring_lines(node: ast.AST) -> tuple[int, int] | None:
    """``(first, last)`` line of a function's or class's docstring when it spans more than
    ``DOCSTRING_LINES`` lines (then shown folded), else None."""
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant):
        return None
    if not isinstance(body[0].value.value, str):
        return None
    first, last = body[0].lineno, body[0].end_lineno or body[0].lineno
    return (first, last) if last - first + 1 > DOCSTRING_LINES else None


def constructor(found: tuple[str, ast.AST] | None) -> tuple[str, str, ast.AST] | None:
    """A class's own initializer (``__init__``, ``__post_init__`` or ``__new__``) as a called function, or
    None (not a class, or one that defines none)."""
    if found is None or not isinstance(found[1], ast.ClassDef):
        return None
    for name in CONSTRUCTORS:
        method = method_of(found[1], name)
        if method is not None:
            return found[0], f"{found[1].name}.{name}", method
    return None


def method_of(cls: ast.ClassDef, name: str) -> ast.AST | None:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def failing_code(tracebacks: list[list[list[object]]], chars: int = FAILURE_CHARS) -> str:
    """The library code on the failing path of ``tracebacks`` in about ``chars`` characters (see the
    module docstring); "" for none."""
    return FailingCode(chars).show(tracebacks)
