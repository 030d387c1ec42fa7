"""The sandbox side of repair by function rewrites: which functions the failing tests point to, and the rewrite.

``agent_engine.agent.aci.tool_program`` runs this source (after ``failing_code``'s, before
``repo_tool``'s, in one namespace); ``repo_tool.main`` answers the ``suspects`` and ``rewrite`` ops
with ``suspects`` and ``rewrite_function``. The host side is ``agent_engine.agent.rewrites``. It needs
nothing but the standard library; importing it runs nothing.

``suspects`` is spectrum-based fault localization (Ochiai, as automated program repair tools use it),
at function level: the task's check runs again under a ``sys.settrace`` hook that records, for each
``unittest`` test (its ``TestCase.run`` wrapped to say which test runs), the repository's library
functions it ran.
A function the failing tests run and the passing ones do not is the likeliest home of the bug:
``score = failed / sqrt(all failed * (failed + passed))``. The static failing path
(``failing_code.FailingCode``: the traceback's library frames, or what the failing test lines call)
breaks ties and stands in when the check runs no ``unittest`` tests (a script) or is not a Python
command. The wrapped ``TestCase.run`` is this run's alone: the judge's run of the check is another
process.

Invariants:
- The check runs with its output sent to ``/dev/null`` (the descriptors restored after); what this
  prints is one JSON list of suspects, at most ``limit``, each ``{"path", "name", "first", "last",
  "score", "failed", "passed", "text"}`` (``name`` qualified, a nested function mapped to the
  outermost function or method that holds it; ``first`` counts its decorators; ``text`` the lines
  ``first``..``last`` exactly), library code only (never a test file, a read-only file or anything
  outside the repository), functions of at most ``max_lines`` lines.
- A check that ends the process (``os._exit``) or never finishes leaves no list: the host then has no
  suspects from the spectrum. Formatting methods (``__repr__``, ``__str__``, ``__format__``), which a
  failing assertion runs to print its message, rank after every other suspect.
- ``rewrite_function`` writes only when the file's lines ``first``..``last`` are still exactly
  ``old`` and the result compiles (``file_tool.written``: never a read-only file, the undo kept), and
  prints what it did; otherwise it changes nothing and says why (exit status 1).
"""

from __future__ import annotations

import math
import os
import runpy
import sys

if __name__.startswith("agent_engine."):  # on the host; in the sandbox the earlier sources ran here
    from agent_engine.agent.failing_code import FailingCode, Source
    from agent_engine.agent.file_tool import is_test_path, read_only, read_text, written

SUSPECTS = 6
SUSPECT_LINES = 80
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
                name = getattr(code, "co_qualname", code.co_name).split(".<locals>")[0]
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

    def scores(self, failing: list[str]) -> dict[tuple[str, str], tuple[float, int, int]]:
        """``(path, name) -> (Ochiai score, failing tests that ran it, passing tests that ran it)``; a
        check without matching tests counts its calls outside tests as the one failing run."""
        failed_keys = [k for k in self.hits if k is not None and any(same_test(k, f) for f in failing)]
        if not failed_keys:
            failed_keys = [None] if None in self.hits else []
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for key, functions in self.hits.items():
            for fn in functions:
                f, p = out.get(fn, (0, 0))
                out[fn] = (f + (key in failed_keys), p + (key not in failed_keys and key is not None))
        total = len(failed_keys)
        return {fn: (f / math.sqrt(total * (f + p)) if f else 0.0, f, p) for fn, (f, p) in out.items()}


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
    entry = check_entry(argv)
    if entry is None:
        return None
    kind, target = entry
    rest = argv[argv.index(target) + 1:]
    spectrum = Spectrum()
    sys.stdout.flush()
    saved = os.dup(1), os.dup(2)
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    sys.argv = [target, *rest]
    sys.path.insert(0, os.path.dirname(os.path.realpath(target)) if kind == "script" else os.path.realpath("."))
    spectrum.arm()
    try:
        if kind == "script":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except BaseException:  # noqa: BLE001 - the check's own end (SystemExit) or crash: the spectrum so far
        pass
    finally:
        sys.settrace(None)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    return spectrum


def suspects(argv: list[str], failing: list[str], tracebacks: list[list[list[object]]], limit: int = SUSPECTS,
             max_lines: int = SUSPECT_LINES) -> list[dict[str, object]]:
    """The functions to rewrite first (see the module docstring)."""
    static = [(path, name) for path, name, _ in FailingCode().ranked(tracebacks)]
    spectrum = run_traced(argv) if argv else None
    scores = spectrum.scores(failing) if spectrum is not None else {}
    order = spectrum.order if spectrum is not None else {}
    names = {fn for fn, (_, failed, _) in scores.items() if failed} | set(static)

    def rank(fn: tuple[str, str]) -> tuple[bool, float, int]:
        at = static.index(fn) if fn in static else len(static) + order.get(fn, len(order))
        return fn[1].split(".")[-1] in FORMATTING, -scores.get(fn, (0.0, 0, 0))[0], at

    found: list[dict[str, object]] = []
    for path, name in sorted(names, key=rank):
        if len(found) >= limit:
            break
        span = function_span(path, name)
        if span is None or span[1] - span[0] + 1 > max_lines:
            continue
        score, failed, passed = scores.get((path, name), (0.0, 0, 0))
        found.append({"path": path, "name": name, "first": span[0], "last": span[1], "score": round(score, 3),
                      "failed": failed, "passed": passed, "text": span[2]})
    return found


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
