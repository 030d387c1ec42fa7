"""The sandbox side of repair by function rewrites: which functions the failing tests point to, and the rewrite.

``agent_engine.agent.aci.tool_program`` runs this source (after ``failing_code``'s, before
``repo_tool``'s, in one namespace); ``repo_tool.main`` answers the ``suspects`` and ``rewrite`` ops
with ``suspects`` and ``rewrite_function``. The host side is ``agent_engine.agent.rewrites``. It needs
nothing but the standard library; importing it runs nothing.

``suspects`` is spectrum-based fault localization (Ochiai, as automated program repair tools use it),
at function level: the task's check runs again under a ``sys.settrace`` hook that records, for each
``unittest`` test (its ``TestCase.run`` wrapped to say which test runs), the repository's library
functions it ran.
Some bugs live outside any function (a module's constant, a data file the code reads, a function
the tests import that is missing): short files the failure names or the failing tests opened are
suspects as a whole.
A function the failing tests run and the passing ones do not is the likeliest home of the bug:
``score = failed / sqrt(all failed * (failed + passed))``. The static failing path
(``failing_code.FailingCode``: the traceback's library frames, or what the failing test lines call)
breaks ties and stands in when the check runs no ``unittest`` tests (a script) or is not a Python
command. The wrapped ``TestCase.run`` is this run's alone: the judge's run of the check is another
process.

Invariants:
- The check runs with its output sent to ``/dev/null`` (the descriptors restored after, ``open`` too);
  what this prints is one JSON list of suspects, at most ``limit``, each ``{"kind", "path", "name",
  "first", "last", "score", "failed", "passed", "text"}`` (a function's also ``notes``: what a linter
  sees in it, ``[line, text]`` pairs of ``code_notes.function_notes``; and ``lost``, the names whose
  assignment it may have lost, ``code_notes.lost_names``): ``kind`` ``function`` (``name`` qualified, a
  nested function mapped to the outermost function or method that holds it, or listed alone when that
  one is too long to list; ``first`` counts its
  decorators; ``text`` the lines ``first``..``last`` exactly; at most ``max_lines`` lines), ``lines``
  (the same, for a function of up to ``LONG_LINES`` lines: the model rewrites a line range) or ``file``
  (a whole file of at most ``SMALL_FILE_LINES`` lines, ``text`` without its final newline: a data file
  the failing tests opened, a file the failure names, a file holding a suspect function), library code
  only (never a test file, a read-only file or anything outside the repository).
- A check that ends the process (``os._exit``) or never finishes leaves no list: the host then has no
  suspects from the spectrum. Formatting methods (``__repr__``, ``__str__``, ``__format__``), which a
  failing assertion runs to print its message, rank after every other suspect; among the rest, a
  function that looks broken (``looks_broken``: dead code after a ``return``, a docstring below its
  first statement) ranks first.
- ``rewrite_function`` writes only when the file's lines ``first``..``last`` are still exactly
  ``old`` and the result compiles (``file_tool.written``: never a read-only file, the undo kept), and
  prints what it did; otherwise it changes nothing and says why (exit status 1).
"""

from __future__ import annotations

import ast
import math
import os
import re
import runpy
import sys
from collections.abc import Callable

if __name__.startswith("agent_engine."):  # on the host; in the sandbox the earlier sources ran here
    from agent_engine.agent.code_notes import function_notes, lost_names, module_names, scope_names
    from agent_engine.agent.failing_code import FailingCode, Source
    from agent_engine.agent.file_tool import is_test_path, read_only, read_text, written
    from agent_engine.agent.suspect_priors import issue_overlap, looks_broken

SUSPECTS = 6
SUSPECT_LINES = 80  # a longer function is rewritten by line ranges (kind ``lines``) ...
LONG_LINES = 250  # ... up to this long
SMALL_FILE_LINES = 60  # a file this short is a suspect as a whole (module constants, data, what is missing)
SMALL_FILE_CHARS = 3000
ISSUE_WEIGHT = 0.1  # of the issue's vocabulary in a suspect's rank, beside its Ochiai score (0..1)
_MENTIONED = re.compile(r"[A-Za-z0-9_./~-]+\.[A-Za-z0-9]+")  # a path a check's output may name
FORMATTING = ("__repr__", "__str__", "__format__")
PYTHON_FLAGS = ("-I", "-B", "-u", "-E", "-s", "-S", "-O", "-OO", "-q")


class Spectrum:
    """The library functions each test ran (key ``None``: calls outside any test)."""

    def __init__(self) -> None:
        self.root = os.path.realpath(".")
        self.kinds: dict[str, str | None] = {}  # file -> its path in the repository when library code
        self.current: str | None = None
        self.hits: dict[str | None, set[tuple[str, str]]] = {}
        self.order: dict[tuple[str, str], int] = {}
        self.opened: dict[str | None, set[str]] = {}  # test -> the repository's data files it opened

    def library_path(self, filename: str) -> str | None:
        """The path of a code object's file relative to the repository when it is library code (not a
        test, not a read-only check file, not outside the repository), else None."""
        if filename not in self.kinds:
            real = os.path.realpath(filename) if filename and not filename.startswith("<") else ""
            rel = os.path.relpath(real, self.root) if real.startswith(self.root + os.sep) else ""
            library = rel.endswith(".py") and not is_test_path(rel) and not read_only(rel)
            self.kinds[filename] = rel if library else None
        return self.kinds[filename]

    def on_call(self, frame: object, event: str, arg: object) -> None:
        """The trace hook: record a library function's call under the running test; it never traces
        lines (returns None) and never raises."""
        try:
            code = frame.f_code  # type: ignore[attr-defined]
            rel = self.library_path(code.co_filename)
            if rel is not None:
                qualname = getattr(code, "co_qualname", code.co_name)
                for name in dict.fromkeys((qualname.split(".<locals>")[0], qualname.replace(".<locals>", ""))):
                    self.order.setdefault((rel, name), len(self.order))
                    self.hits.setdefault(self.current, set()).add((rel, name))
        except RecursionError:
            pass

    def arm(self) -> None:
        """Trace from now on, and before each ``unittest`` test (a test that recursed too deep switches a
        hook off; each test arms it again) under that test's id."""
        import unittest

        original = unittest.TestCase.run
        spectrum = self

        def run(test: unittest.TestCase, result: unittest.TestResult | None = None) -> object:
            spectrum.current = test.id()
            sys.settrace(spectrum.on_call)
            try:
                return original(test, result)
            finally:
                spectrum.current = None

        unittest.TestCase.run = run  # type: ignore[method-assign]
        sys.settrace(self.on_call)

    def watch_opens(self) -> Callable[[], None]:
        """Record the data files each test opens (``open``, ``io.open``: configparser, json, pathlib read
        through them); returns what restores both."""
        import builtins
        import io

        original = builtins.open
        spectrum = self

        def opened(file: object, *args: object, **kwargs: object) -> object:
            if isinstance(file, str | os.PathLike):
                rel = editable_path(os.fspath(file), spectrum.root)
                if rel is not None and not rel.endswith(".py"):
                    spectrum.opened.setdefault(spectrum.current, set()).add(rel)
            return original(file, *args, **kwargs)  # type: ignore[call-overload]

        builtins.open = io.open = opened  # type: ignore[assignment]

        def restore() -> None:
            builtins.open = io.open = original

        return restore

    def failed_keys(self, failing: list[str]) -> list[str | None]:
        """The traced tests the report names as failing; a check without matching tests (a script) has its
        calls outside tests as the one failing run."""
        keys = set(self.hits) | set(self.opened)
        failed: list[str | None] = [k for k in keys if k is not None and any(same_test(k, f) for f in failing)]
        return failed or ([None] if None in keys else [])

    def opened_by(self, failing: list[str]) -> list[str]:
        """The data files the failing tests opened, sorted."""
        return sorted({rel for key in self.failed_keys(failing) for rel in self.opened.get(key, set())})

    def scores(self, failing: list[str]) -> dict[tuple[str, str], tuple[float, int, int]]:
        """``(path, name) -> (Ochiai score, failing tests that ran it, passing tests that ran it)``; a
        check without matching tests counts its calls outside tests as the one failing run."""
        failed_keys = self.failed_keys(failing)
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for key, functions in self.hits.items():
            for fn in functions:
                f, p = out.get(fn, (0, 0))
                out[fn] = (f + (key in failed_keys), p + (key not in failed_keys and key is not None))
        total = len(failed_keys)
        return {fn: (f / math.sqrt(total * (f + p)) if f else 0.0, f, p) for fn, (f, p) in out.items()}


def editable_path(filename: str, root: str) -> str | None:
    """``filename`` relative to the repository ``root`` when it is a file there that the repair may change
    (not a test, not read-only), else None."""
    real = os.path.realpath(filename)
    if not real.startswith(root + os.sep) or not os.path.isfile(real):
        return None
    rel = os.path.relpath(real, root)
    return None if is_test_path(rel) or read_only(rel) else rel


def same_test(traced: str, reported: str) -> bool:
    """Whether a test's ``unittest`` id is the test a report names (``tests/test_x.py::Case::test_y``,
    ``tests.test_x.Case.test_y``)."""
    a, b = (t.replace("::", ".").replace("/", ".").replace(".py.", ".") for t in (traced, reported))
    return a == b or a.endswith("." + b) or b.endswith("." + a)


def check_entry(argv: list[str]) -> tuple[str, str] | None:
    """``("script", path)`` or ``("module", name)`` that a Python command's arguments (after the
    interpreter) run, or None when they run something else (``-c``, no script)."""
    rest = list(argv)
    while rest and rest[0] in PYTHON_FLAGS:
        rest.pop(0)
    if len(rest) >= 2 and rest[0] == "-m":
        return "module", rest[1]
    if rest and rest[0].endswith(".py") and os.path.isfile(rest[0]):
        return "script", rest[0]
    return None


def run_traced(argv: list[str]) -> Spectrum | None:
    """Run the check (a Python command's arguments) under the spectrum's hook, its output discarded;
    None when the arguments run no script or module."""
    spectrum = Spectrum()

    def arm() -> Callable[[], None]:
        restore_open = spectrum.watch_opens()
        spectrum.arm()
        return lambda: (sys.settrace(None), restore_open())

    return spectrum if run_quietly(argv, arm) else None


class FailingOnly:
    """The check's failing tests run alone: every other ``unittest`` test returns at once, unrun; counts
    the failing tests that ran and those that failed (a failure, an error or an unexpected success)."""

    def __init__(self, failing: list[str]) -> None:
        self.failing = failing
        self.ran = 0
        self.failed = 0

    def arm(self) -> Callable[[], None]:
        import unittest

        original = unittest.TestCase.run
        counts = self

        def run(test: unittest.TestCase, result: unittest.TestResult | None = None) -> object:
            if not any(same_test(test.id(), f) for f in counts.failing):
                return result
            before = _bad_outcomes(result)
            try:
                return original(test, result)
            finally:
                counts.ran += 1
                counts.failed += _bad_outcomes(result) > before

        unittest.TestCase.run = run  # type: ignore[method-assign]

        def restore() -> None:
            unittest.TestCase.run = original  # type: ignore[method-assign]

        return restore


def _bad_outcomes(result: object) -> int:
    """Failures, errors and unexpected successes a ``unittest`` result holds so far (0 for none)."""
    return sum(len(getattr(result, name, ())) for name in ("failures", "errors", "unexpectedSuccesses"))


def failing_outcome(argv: list[str], failing: list[str]) -> dict[str, int] | None:
    """``{"ran", "failed"}`` of the check's failing tests run alone (``FailingOnly``), or None when the
    arguments run no script or module or no test is named."""
    if not failing:
        return None
    only = FailingOnly(failing)
    return {"ran": only.ran, "failed": only.failed} if run_quietly(argv, only.arm) else None


def run_quietly(argv: list[str], arm: Callable[[], Callable[[], object]]) -> bool:
    """Run the check (a Python command's arguments) in this process, its output sent to ``/dev/null``:
    ``arm`` just before the check's code, what it returns just after; False when the arguments run no
    script or module."""
    entry = check_entry(argv)
    if entry is None:
        return False
    kind, target = entry
    rest = argv[argv.index(target) + 1:]
    sys.stdout.flush()
    saved = os.dup(1), os.dup(2)
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    sys.argv = [target, *rest]
    sys.path.insert(0, os.path.dirname(os.path.realpath(target)) if kind == "script" else os.path.realpath("."))
    disarm = arm()
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except BaseException:  # noqa: BLE001 - the check's own end (SystemExit) or crash: what ran so far counts
        pass
    finally:
        disarm()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    return True


def suspects(argv: list[str], failing: list[str], tracebacks: list[list[list[object]]], limit: int = SUSPECTS,
             max_lines: int = SUSPECT_LINES, output: str = "", issue: str = "",
             leading: int | None = None) -> list[dict[str, object]]:
    """The functions and small files to rewrite first (see the module docstring); a small file counts as
    holding a suspect function only for the first ``leading`` functions (default ``limit``), so the first
    ``leading`` suspects are the same whatever the limit."""
    static = [(path, name) for path, name, _ in FailingCode().ranked(tracebacks)]
    spectrum = run_traced(argv) if argv else None
    scores = spectrum.scores(failing) if spectrum is not None else {}
    order = spectrum.order if spectrum is not None else {}
    names = {fn for fn, (_, failed, _) in scores.items() if failed} | set(static)
    spans = {fn: span for fn in names if (span := function_span(*fn)) is not None and span[1] - span[0] < LONG_LINES}
    spans = {fn: span for fn, span in spans.items() if not _holder_listed(fn, spans)}
    lexical = issue_overlap(issue, {fn: span[2] for fn, span in spans.items()})

    def rank(fn: tuple[str, str]) -> tuple[bool, bool, float, int]:
        at = static.index(fn) if fn in static else len(static) + order.get(fn, len(order))
        suspicion = scores.get(fn, (0.0, 0, 0))[0] + ISSUE_WEIGHT * lexical.get(fn, 0.0)
        return fn[1].split(".")[-1] in FORMATTING, not looks_broken(spans[fn][2]), -suspicion, at

    functions: list[dict[str, object]] = []
    for path, name in sorted(spans, key=rank)[:limit]:
        first, last, text = spans[(path, name)]
        score, failed, passed = scores.get((path, name), (0.0, 0, 0))
        kind = "function" if last - first < max_lines else "lines"
        functions.append({"kind": kind, "path": path, "name": name, "first": first, "last": last,
                          "score": round(score, 3), "issue": round(lexical.get((path, name), 0.0), 3),
                          "failed": failed, "passed": passed, "text": text})
        functions[-1]["notes"], functions[-1]["lost"] = suspect_notes(path, name)
    opened = spectrum.opened_by(failing) if spectrum is not None else []
    named = opened + mentioned_files(output + "\n" + issue, tracebacks)
    holding = [str(f["path"]) for f in functions[:limit if leading is None else leading]]
    return merged(functions, small_files(named, holding), limit)


def _holder_listed(fn: tuple[str, str], listed: dict[tuple[str, str], tuple[int, int, str]]) -> bool:
    """Whether a function that holds nested function ``fn`` is listed itself (then ``fn`` goes with it)."""
    return any(path == fn[0] and fn[1].startswith(name + ".") for path, name in listed)


def mentioned_files(output: str, tracebacks: list[list[list[object]]]) -> list[str]:
    """The repository's editable files the tracebacks, the check's output or the issue (``output`` holds
    both) name, in the order named: as paths, or as dotted module names (``pkg.mod.func`` names
    ``pkg/mod.py``)."""
    root = os.path.realpath(".")
    seen: list[str] = []
    words = [str(frame[0]) for tb in tracebacks for frame in tb if frame] + _MENTIONED.findall(output[:100_000])
    for word in words:
        if len(seen) >= 64:
            break
        for path in [word, *module_files(word)]:
            rel = editable_path(path, root)
            if rel is not None:
                if rel not in seen:
                    seen.append(rel)
                break
    return seen


def module_files(dotted: str) -> list[str]:
    """The module files a dotted name may name, longest first: ``a.b.c`` -> ``a/b/c.py``, ``a/b.py``,
    ``a.py``; never a package's ``__init__.py`` (a package named in an issue is rarely where its bug is)."""
    parts = dotted.split(".") if "/" not in dotted else []
    if not all(p.isidentifier() for p in parts):
        return []
    return ["/".join(parts[:k]) + ".py" for k in range(len(parts), 0, -1)]


def small_files(named: list[str], holding: list[str]) -> list[dict[str, object]]:
    """A whole-file suspect for each short file named by the failure or holding a suspect function:
    the ones holding none first (a data file, a module missing what the check imports), then the rest."""
    found: list[dict[str, object]] = []
    for path in sorted(dict.fromkeys(named + holding), key=lambda p: p in holding):
        span = file_span(path)
        if span is not None:
            found.append({"kind": "file", "path": path, "name": path, "first": 1, "last": span[0], "score": 0.0,
                          "failed": 0, "passed": 0, "text": span[1], "alone": path not in holding})
    return found


def merged(functions: list[dict[str, object]], files: list[dict[str, object]],
           limit: int) -> list[dict[str, object]]:
    """Suspects in the order they are rewritten, at most ``limit``: the first function, then the files that
    hold no suspect function, the other functions, the files that do."""
    alone = [f for f in files if f.pop("alone")]
    holding = [f for f in files if f not in alone]
    return (functions[:1] + alone + functions[1:] + holding)[:limit]


def file_span(path: str) -> tuple[int, str] | None:
    """``(lines, text without its final newline)`` of a short text file, or None when it is longer than
    ``SMALL_FILE_LINES`` lines or ``SMALL_FILE_CHARS`` characters, binary, or empty."""
    text = read_text(path, SMALL_FILE_CHARS)
    if not text or not text.strip():
        return None
    text = text[:-1] if text.endswith("\n") else text
    lines = text.count("\n") + 1
    return (lines, text) if lines <= SMALL_FILE_LINES else None


def function_span(path: str, name: str) -> tuple[int, int, str] | None:
    """``(first line with decorators, last line, those lines' text)`` of the function ``name`` (qualified)
    in ``path``, or None when it is not there."""
    src = Source(path)
    for qualname, node in src.functions():
        if qualname == name and not type(node).__name__ == "ClassDef":
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            last = getattr(node, "end_lineno", None) or node.lineno
            return first, last, "\n".join(src.lines[first - 1:last])
    return None


def suspect_notes(path: str, name: str) -> tuple[list[tuple[int, str]], list[str]]:
    """What a linter sees in the function ``name`` (qualified) of ``path`` (``code_notes``), and the names
    whose assignment it may have lost (``code_notes.lost_names``): the names its module and the functions
    around it bind are visible to it; nothing when it is not there."""
    src = Source(path)
    found = {qualname: node for qualname, node in reversed(src.functions())}  # the first of a name wins
    node = found.get(name)
    if src.tree is None or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [], []
    parts = name.split(".")
    holders = [found.get(".".join(parts[:i])) for i in range(1, len(parts))]
    visible = module_names(src.tree)
    for holder in holders:
        if visible is not None and isinstance(holder, ast.FunctionDef | ast.AsyncFunctionDef):
            visible = visible | frozenset(scope_names(holder))
    method = bool(holders) and isinstance(holders[-1], ast.ClassDef)
    return function_notes(node, src.lines, visible, method), lost_names(node, visible)


def rewrite_function(path: str, first: int, last: int, old: str, new: str) -> int:
    """Replace lines ``first``..``last`` of ``path`` (still reading ``old``) by ``new``; prints what it
    did (see the module docstring)."""
    text = read_text(path, 10_000_000)
    if text is None:
        print(f"{path} cannot be read. Nothing changed.")
        return 1
    lines = text.split("\n")
    if "\n".join(lines[first - 1:last]) != old:
        print(f"Lines {first}-{last} of {path} changed since they were read. Nothing changed.")
        return 1
    result = "\n".join(lines[:first - 1] + new.split("\n") + lines[last:])
    if not written(path, text, result):
        return 1
    print(f"Rewrote lines {first}-{last} of {path} ({len(new.splitlines())} line(s) now).")
    return 0
