"""The judge's check runner: runs a task's check INSIDE the sandbox and reports every test it saw.

It runs as ``python3 -I -B -c SOURCE --judge-request-on-stdin`` with one JSON line on standard input (the judge's request), or
as a plain script (``python3 check.py [TEST_PATH ...]``: a library task's shipped check, the same
source) that runs the tests under the given paths (default ``tests``) and exits 0 exactly when at
least one ran and none failed. It needs nothing but the standard library, and importing it runs
nothing.

The judge's request: ``{"nonce", "mode": "script" | "tests", "argv" (script mode: ``["check.py",
...]`` or ``["-m", "module", ...]``), "paths" (tests mode: test files or folders), "check_files"
(paths relative to the repository that make up the pristine check), "must_pass" (test ids),
"native" (whether the pristine repository holds extension modules)}``.

Invariants (what the code under test cannot do to the verdict):
- The nonce is read from standard input, which is then closed: it is in no argument, variable or
  file. The report is one line, ``REPORT_MARK + nonce + " " + JSON``, written last on a copy of the
  standard output taken before any repository code ran; a run that ends early (``os._exit``, a
  signal, a closed stream) leaves no report, and a report without the nonce is not one.
- Nothing the agent could have planted runs before the check: isolated mode (no user site, no
  ``PYTHON*`` variables, no working folder on the path), no bytecode written, and none read from the
  repository: its folders import sources only (``.py``; extension modules only when the pristine
  repository has some), whatever ``__pycache__`` or stray ``.pyc`` stand there.
- Every module the runner itself uses is imported before the repository goes on the path, so no file
  of the repository shadows them.
- Each test's outcome is recorded by the runner's own hooks on ``unittest.TestResult`` (``passed``,
  ``failed``, ``error``, ``skipped``, ``xfailed``), never read from a result's ``wasSuccessful``; if
  the test machinery (``TestCase``, ``TestSuite``, ``TestResult``, the runner's hooks, ``sys.exit``
  and its kin) was changed while the check ran, the report says ``tampered``. (A process can still
  read its own memory: the guarantee is against code that ends, patches or bypasses the check, not
  against code written to search the runner's memory for its nonce.)
- Script mode: a ``SystemExit`` counts as the check's own only when the innermost repository frame
  that raised it is a check file; one raised by the code under test is reported as such.
- Tests mode collects ``unittest.TestCase`` classes and pytest-style tests (module-level ``test*``
  functions and ``Test*`` classes' ``test*`` methods, without fixtures) from ``test_*.py`` and
  ``*_test.py`` files. Test ids are pytest's: ``path/to/test_file.py::Class::test_name``.
- The report is bounded: counts, at most ``MAX_LISTED`` failing ids and their first error lines.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import io
import json
import os
import runpy
import sys
import traceback
import types
import unittest

REPORT_MARK = "@@agent-engine-check-report@@"
JUDGE_FLAG = "--judge-request-on-stdin"
MAX_LISTED = 20  # failing test ids in a report, at most
MESSAGE_CHARS = 300  # characters of a failure's last line kept in the report
TEST_FILE_PREFIX, TEST_FILE_SUFFIX = "test_", "_test.py"
PASSING = ("passed", "skipped", "xfailed")
_RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}


class Outcomes:
    """Each test's outcome, as the hooks on ``unittest.TestResult`` saw it (worst outcome wins)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.by_id: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    def record(self, test: object, outcome: str, err: object = None) -> None:
        test_id = pytest_id(test, self.root)
        old = self.by_id.get(test_id)
        if old is None or _RANK[outcome] > _RANK.get(old, -1) or old == "started":
            self.by_id[test_id] = outcome
        if err is not None and test_id not in self.messages:
            self.messages[test_id] = last_line(err)

    def start(self, test: object) -> None:
        self.by_id.setdefault(pytest_id(test, self.root), "started")

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for outcome in self.by_id.values():
            out[outcome] = out.get(outcome, 0) + 1
        return out

    def failing(self) -> list[str]:
        return [t for t, o in self.by_id.items() if o not in PASSING]


def last_line(err: object) -> str:
    """The last line of an ``exc_info`` triple's formatted exception, bounded."""
    try:
        exc = err[1] if isinstance(err, tuple) else err  # type: ignore[index]
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
        line = text[-1] if text else ""
    except Exception:  # noqa: BLE001 - a hostile exception's __str__: say nothing
        line = "<unprintable error>"
    return line[:MESSAGE_CHARS]


def pytest_id(test: object, root: str) -> str:
    """``relative/file.py::Class::method`` for a test case (its module's file relative to ``root``)."""
    if isinstance(test, PlainTest):
        return test.test_id
    doc = getattr(test, "_dt_test", None)  # a doctest: its file and its name
    if doc is not None:
        return f"{relative(doc.filename or '', root)}::{doc.name}"
    method = getattr(test, "_testMethodName", None)
    cls = type(test)
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if method is None or path is None:  # a subtest or an error holder: unittest's own id
        described = getattr(test, "test_case", None)
        if described is not None:
            return pytest_id(described, root)
        return str(getattr(test, "id", lambda: repr(test))())
    return f"{relative(path, root)}::{cls.__qualname__.replace('.', '::')}::{method}"


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` when it lies inside (links resolved), else as it is."""
    if not os.path.isabs(path):  # "<frozen importlib._bootstrap>", "<string>": no file
        return path
    real = os.path.realpath(path)
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else real


class PlainTest(unittest.FunctionTestCase):
    """A pytest-style test (a function, or a method of a plain ``Test*`` class made per test)."""

    def __init__(self, func: types.FunctionType, test_id: str, owner: type | None = None) -> None:
        self.test_id = test_id
        self._owner = owner
        super().__init__(self._call, description=test_id)
        self._func = func

    def _call(self) -> None:
        if self._owner is None:
            self._func()
            return
        instance = self._owner()
        setup, teardown = getattr(instance, "setup_method", None), getattr(instance, "teardown_method", None)
        if setup is not None:
            setup(self._func)
        try:
            self._func(instance)
        finally:
            if teardown is not None:
                teardown(self._func)

    def id(self) -> str:
        return self.test_id

    def __str__(self) -> str:  # the report's ``ERROR: ...`` line names the test, not ``_call``
        return self.test_id


def plain_tests(module: types.ModuleType, rel_path: str) -> list[unittest.TestCase]:
    """The pytest-style tests of ``module`` (functions and plain classes defined in it)."""
    out: list[unittest.TestCase] = []
    for name, value in list(vars(module).items()):
        if not name.startswith("test") and not name.startswith("Test"):
            continue
        if isinstance(value, types.FunctionType) and name.startswith("test") and value.__module__ == module.__name__:
            out.append(PlainTest(value, f"{rel_path}::{name}"))
        elif (isinstance(value, type) and name.startswith("Test") and not issubclass(value, unittest.TestCase)
              and value.__module__ == module.__name__ and "__init__" not in vars(value)):
            for attr, func in vars(value).items():
                if attr.startswith("test") and isinstance(func, types.FunctionType):
                    out.append(PlainTest(func, f"{rel_path}::{name}::{attr}", value))
    return out


def test_files(paths: list[str], root: str) -> list[str]:
    """The test files under ``paths`` (links not followed), sorted."""
    found: list[str] = []
    for path in paths:
        full = os.path.join(root, path)
        if os.path.isfile(full) and not os.path.islink(full):
            found.append(full)
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            found += [os.path.join(dirpath, f) for f in sorted(filenames)
                      if f.endswith(".py") and (f.startswith(TEST_FILE_PREFIX) or f.endswith(TEST_FILE_SUFFIX))]
    return found


def import_test_file(path: str, root: str) -> types.ModuleType:
    """Import a test file as a package module when its folders up to ``root`` are packages, else by its
    name with its folder first on the path (pytest's default)."""
    folder = os.path.dirname(path)
    parts = [os.path.basename(path)[:-3]]
    while folder != root and os.path.isfile(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if folder != root and folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(".".join(parts))


def collect(paths: list[str], root: str) -> tuple[unittest.TestSuite, list[tuple[str, BaseException]]]:
    """Every test under ``paths``; files that fail to import are returned with their error."""
    suite, broken = unittest.TestSuite(), []
    loader = unittest.TestLoader()
    for path in test_files(paths, root):
        rel = os.path.relpath(path, root)
        try:
            module = import_test_file(path, root)
        except BaseException as e:  # noqa: BLE001 - a test file that cannot import is one error
            if isinstance(e, KeyboardInterrupt):
                raise
            broken.append((rel, e))
            continue
        suite.addTests(loader.loadTestsFromModule(module))
        suite.addTests(plain_tests(module, rel))
    return suite, broken


_HOOKED = ("startTest", "addSuccess", "addFailure", "addError", "addSkip", "addExpectedFailure",
           "addUnexpectedSuccess", "addSubTest")


def install_hooks(outcomes: Outcomes) -> dict[str, object]:
    """Wrap ``unittest.TestResult``'s methods so every outcome is recorded; returns the wrappers."""
    base = unittest.TestResult
    hooks: dict[str, object] = {}

    def wrap(name: str, original: object) -> object:
        def hooked(self: unittest.TestResult, test: object, *args: object) -> object:
            if name == "startTest":
                outcomes.start(test)
            elif name == "addSuccess":
                outcomes.record(test, "passed")
            elif name in ("addFailure", "addUnexpectedSuccess"):
                outcomes.record(test, "failed", args[0] if args else None)
            elif name == "addError":
                outcomes.record(test, "error", args[0])
            elif name == "addSkip":
                outcomes.record(test, "skipped")
            elif name == "addExpectedFailure":
                outcomes.record(test, "xfailed")
            elif name == "addSubTest" and len(args) >= 2 and args[1] is not None:
                failed = isinstance(args[1], tuple) and isinstance(args[1][1], AssertionError)
                outcomes.record(test, "failed" if failed else "error", args[1])
            return original(self, test, *args)  # type: ignore[operator]
        return hooked

    for name in _HOOKED:
        hooks[name] = wrap(name, getattr(base, name))
        setattr(base, name, hooks[name])
    return hooks


def machinery() -> dict[str, object]:
    """The functions a test's outcome depends on, by name (compared before and after the check)."""
    owners: dict[str, object] = {"TestCase": unittest.TestCase, "TestSuite": unittest.TestSuite,
                                 "TestResult": unittest.TestResult, "FunctionTestCase": unittest.FunctionTestCase,
                                 "_Outcome": getattr(unittest.case, "_Outcome", object)}
    state: dict[str, object] = {}
    for owner_name, owner in owners.items():
        for attr, value in vars(owner).items():
            if callable(value) or isinstance(value, (staticmethod, classmethod)):
                state[f"{owner_name}.{attr}"] = value
    for name in ("_addSkip",):
        state[f"case.{name}"] = getattr(unittest.case, name, None)
    for owner_name, owner, names in (("sys", sys, ("exit", "excepthook")), ("os", os, ("_exit", "abort")),
                                     ("builtins", builtins, ("exit", "quit", "SystemExit", "isinstance"))):
        for name in names:
            state[f"{owner_name}.{name}"] = getattr(owner, name, None)
    return state


def source_only_imports(root: str, native: bool) -> None:
    """Import nothing compiled from under ``root``: sources only (extension modules when ``native``)."""
    source = (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)
    ext = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    byte = (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES)
    default_hook = importlib.machinery.FileFinder.path_hook(ext, source, byte)
    repo_hook = importlib.machinery.FileFinder.path_hook(*((ext, source) if native else (source,)))

    def hook(path: str) -> object:
        real = os.path.realpath(path or ".")
        inside = real == root or real.startswith(root + os.sep)
        return repo_hook(path) if inside else default_hook(path)

    sys.path_hooks[:] = [h for h in sys.path_hooks if "FileFinder" not in getattr(h, "__qualname__", "")] + [hook]
    sys.path_importer_cache.clear()
    sys.dont_write_bytecode = True
    # Cached bytecode is looked up (and would be written) under a prefix where nothing can exist, so a
    # ``__pycache__`` the repository holds is never read, and no folder is left behind.
    sys.pycache_prefix = os.path.join(os.devnull, "pycache")


def exit_origin(exc: SystemExit, root: str, check_files: list[str]) -> str:
    """``"check"`` when the innermost repository frame that raised ``exc`` is a check file (or none of
    the frames is in the repository), ``"repository"`` when it is the code under test."""
    innermost = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        rel = relative(filename, root)
        if os.path.isabs(filename) and not os.path.isabs(rel):
            innermost = rel
        tb = tb.tb_next
    if innermost is None:
        return "check"
    inside = any(innermost == c or innermost.startswith(c.rstrip("/") + "/") for c in check_files)
    return "check" if inside else "repository"


def exit_code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def run_script(argv: list[str], root: str, check_files: list[str]) -> dict[str, object]:
    """Run a check program (``script.py ARGS`` or ``-m module ARGS``) as ``python3`` would."""
    module = argv[1] if argv[:1] == ["-m"] and len(argv) > 1 else None
    target = module or os.path.join(root, argv[0])
    sys.argv = [target, *argv[2:]] if module else [target, *argv[1:]]
    sys.path.insert(0, root if module else os.path.dirname(os.path.realpath(target)))
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        return {"exit": exit_code(e.code), "exit_from": exit_origin(e, root, check_files)}
    except BaseException as e:  # noqa: BLE001 - the check's own failure, reported
        traceback.print_exc()
        return {"exit": 1, "exit_from": "exception", "error": last_line(e)}
    return {"exit": 0, "exit_from": "end"}


def run_tests(paths: list[str], root: str, stream: io.TextIOBase | None = None) -> dict[str, object]:
    """Collect and run the tests under ``paths``; what went wrong besides failing tests is reported.
    The repository's root goes first on the path, and its ``src`` folder when it has one (the
    ``src/`` layout, as pytest's ``pythonpath = src``)."""
    sys.path.insert(0, root)
    if os.path.isdir(os.path.join(root, "src")):
        sys.path.insert(0, os.path.join(root, "src"))
    suite, broken = collect(paths, root)
    runner = unittest.TextTestRunner(stream=stream or sys.stderr, verbosity=1)
    runner.run(suite)
    return {"broken_files": [f"{rel}: {last_line(e)}" for rel, e in broken][:MAX_LISTED],
            "n_broken_files": len(broken)}


def report(outcomes: Outcomes, run: dict[str, object], must_pass: list[str], tampered: list[str]) -> dict[str, object]:
    """The bounded report of a run (see the module docstring)."""
    failing = outcomes.failing()
    missing = [t for t in must_pass if outcomes.by_id.get(t) != "passed"]
    return {**run, "counts": outcomes.counts(), "failing": failing[:MAX_LISTED],
            "messages": {t: outcomes.messages.get(t, "") for t in failing[:MAX_LISTED]},
            "must_pass_missing": missing[:MAX_LISTED], "n_must_pass_missing": len(missing),
            "tampered": tampered[:MAX_LISTED]}


def judge_main() -> None:
    """The judge's entry: read the request, run the check, write the report, exit without cleanup."""
    request = json.loads(sys.stdin.readline())
    sys.stdin.close()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    root = os.path.realpath(os.getcwd())
    check_files = [str(c) for c in request.get("check_files", [])]
    source_only_imports(root, bool(request.get("native")))
    outcomes = Outcomes(root)
    hooks = install_hooks(outcomes)
    before = machinery()
    if request.get("mode") == "tests":
        run = run_tests([str(p) for p in request.get("paths", [])], root)
    else:
        run = run_script([str(a) for a in request.get("argv", [])], root, check_files)
    after = machinery()
    tampered = sorted(k for k in before.keys() | after.keys() if before.get(k) is not after.get(k))
    tampered += [f"TestResult.{n}" for n, h in hooks.items() if vars(unittest.TestResult).get(n) is not h]
    body = report(outcomes, run, [str(t) for t in request.get("must_pass", [])], sorted(set(tampered)))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001,S110 - a stream the code under test broke: the report still goes out
            pass
    out.write(f"\n{REPORT_MARK}{request['nonce']} {json.dumps(body, sort_keys=True)}\n")
    out.flush()
    os._exit(0)


def script_main(paths: list[str]) -> int:
    """``python3 check.py [PATH ...]``: run the tests, print a summary; 0 when some ran and none failed."""
    root = os.path.realpath(os.path.dirname(os.path.abspath(sys.argv[0])))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != root]
    outcomes = Outcomes(root)
    install_hooks(outcomes)
    run = run_tests(paths or ["tests"], root)
    counts, failing = outcomes.counts(), outcomes.failing()
    for rel in run["broken_files"]:  # type: ignore[union-attr]
        print(f"could not import {rel}")
    print(f"{sum(counts.values())} tests: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    for test_id in failing[:MAX_LISTED]:
        print(f"FAILED {test_id}: {outcomes.messages.get(test_id, '')}")
    ok = counts.get("passed", 0) > 0 and not failing and not run["n_broken_files"]
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:] == [JUDGE_FLAG]:
        judge_main()
    sys.exit(script_main(sys.argv[1:]))
