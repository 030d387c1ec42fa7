"""The repository-aware tools: the map, search, line windows, and the failing code after a failing check.

Each program is checked on the host (``agent_engine.agent.repo_tool`` / ``file_tool`` imported, the
working folder a temporary repository) for its rules, and through a real sandbox for the path the
agent takes (``aci.run_tool_call``, the program run as ``python3 -I -c``).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fakes import tool_call

from agent_engine.agent import aci, failing_code, file_view, repo_tool
from agent_engine.agent.aci import annotate, focus_words, repo_map, run_tool_call, tool_program
from agent_engine.agent.failures import cap_text, failures_line, read_failures, summarize_unittest
from agent_engine.agent.sandbox import Sandbox

pytestmark = pytest.mark.core

PARSER = '''\
"""A tiny parser."""


class ParseError(ValueError):
    pass


class Parser:
    def __init__(self, tokens):
        self.tokens, self.i = tokens, 0

    def peek(self):
        return self.tokens[self.i]

    def parse_sum(self):
        node = self.peek()
        self.i += 1
        while self.i < len(self.tokens) and self.peek() in "+-":
            op = self.peek()
            self.i += 1
            node = (op, node, self.parse_sum())
        return node


def parse(text):
    parser = Parser(text.split())
    return parser.parse_sum()
'''
EVAL = '''\
from calcpkg.parser import parse


def evaluate(text):
    return walk(parse(text))


def walk(tree):
    if isinstance(tree, str):
        return int(tree)
    op, left, right = tree
    return walk(left) - walk(right) if op == "-" else walk(left) + walk(right)


def divide(a, b):
    return ratio(a, b)


def ratio(a, b):
    return a / b
'''
TEST = '''\
import unittest

from calcpkg import evaluate, divide


class CalcTest(unittest.TestCase):
    def test_chain(self):
        self.assertEqual(evaluate("10 - 4 - 3"), 3)

    def test_divide(self):
        self.assertEqual(divide(1, 0), 0)


if __name__ == "__main__":
    unittest.main()
'''


def make_repo(root: Path) -> Path:
    files = {"calcpkg/__init__.py": "from calcpkg.evaluator import divide, evaluate\n",
             "calcpkg/parser.py": PARSER, "calcpkg/evaluator.py": EVAL, "tests/__init__.py": "",
             "tests/test_calc.py": TEST, "check.py": "import sys, unittest\nsys.exit(0)\n",
             "data/config.json": '{"a": 1}\n'}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name in ("tests/__init__.py", "tests/test_calc.py", "check.py"):
        (root / name).chmod(0o444)
    return root


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    make_repo(tmp_path)
    with Sandbox.create(str(tmp_path), timeout=30, isolation="process") as sb:
        yield sb


# --------------------------------------------------------------------------- the map


def test_the_map_shows_definitions_with_line_numbers_and_summarizes_tests(repo: Path) -> None:
    text = repo_tool.repo_map(".")
    assert "calcpkg/parser.py\n    4 class ParseError\n    8 class Parser: __init__ 9, peek 12, parse_sum 15\n" \
           "   25 def parse\n" in text
    assert "check.py (read-only)" in text and "data/config.json" in text
    assert "tests/ (read-only): 2 test file(s): __init__.py, test_calc.py" in text
    assert "def test_chain" not in text  # tests are summarized, not mapped


def test_the_map_fits_its_budget_on_a_big_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for m in range(120):
        body = "".join(f"def function_{m}_{f}(x):\n    return x\n\n\n" for f in range(15))
        (tmp_path / "big" / f"mod_{m:03d}.py").parent.mkdir(exist_ok=True)
        (tmp_path / "big" / f"mod_{m:03d}.py").write_text(body)
    (tmp_path / "big" / "special.py").write_text("class Special:\n    def run(self):\n        pass\n")
    monkeypatch.chdir(tmp_path)
    text = repo_tool.repo_map(".", budget=1500, focus=["Special"])
    assert len(text) <= 1500 and "more lines not shown (view_file FOLDER maps one folder)" in text
    assert "big/mod_000.py" in text and "function_0_0" not in text  # degraded to paths
    full = repo_tool.repo_map(".", budget=100_000, focus=[])
    assert "function_119_14" in full and "big/special.py\n    1 class Special: run 2" in full


def test_a_big_tree_folds_its_folders_but_not_the_one_the_task_names(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for pkg in ("alpha", "beta", "gamma"):
        for sub in range(8):
            for m in range(10):
                path = tmp_path / "lib" / pkg / f"sub{sub}" / f"m{m}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("def f():\n    pass\n")
    (tmp_path / "lib" / "beta" / "sub3" / "heap.py").write_text("class MinHeap:\n    def pop(self):\n        pass\n")
    monkeypatch.chdir(tmp_path)
    text = repo_tool.repo_map(".", budget=2000, focus=["MinHeap"])
    assert len(text) <= 2000 and "more lines not shown" not in text
    assert "lib/alpha/: 80 files (sub0/m0.py, sub0/m1.py, sub0/m2.py, ...)" in text
    assert "lib/beta/sub2/: 10 files" in text and "lib/beta/sub3/heap.py\n    1 class MinHeap: pop 2" in text


def test_the_task_words_keep_their_modules_detailed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for m in range(30):
        (tmp_path / f"mod_{m:02d}.py").write_text("".join(f"def f{f}():\n    pass\n" for f in range(6)))
    (tmp_path / "lru.py").write_text("class LRUCache:\n    def get(self, k):\n        pass\n")
    monkeypatch.chdir(tmp_path)
    text = repo_tool.repo_map(".", budget=1200, focus=focus_words("LRUCache.get forgets the most recent key"))
    assert "lru.py\n    1 class LRUCache: get 2\nmod_00.py\n" in text  # the others lost their definitions


def test_the_map_runs_in_the_sandbox(sandbox: Sandbox) -> None:
    text = repo_map(sandbox)
    assert "   25 def parse" in text and "tests/ (read-only)" in text
    folder = run_tool_call(sandbox, tool_call("view_file", path="calcpkg", start_line=0, end_line=0))
    assert folder.exit_code == 0 and "calcpkg/evaluator.py" in folder.observation and "tests/" not in folder.observation


def test_the_program_never_imports_the_repository(tmp_path: Path) -> None:
    for shadow in ("ast", "stat", "time", "json", "os"):
        (tmp_path / f"{shadow}.py").write_text("raise SystemExit('shadowed')\n")
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    with Sandbox.create(str(tmp_path), timeout=30, isolation="process") as sb:
        assert "    1 def add" in repo_map(sb)
        found = run_tool_call(sb, tool_call("search", pattern="return a"))
        assert found.exit_code == 0 and "shadowed" not in found.observation


def test_the_program_stays_well_under_the_argument_limit() -> None:
    assert len(tool_program()) < 100_000  # one argv string: Linux allows 128 KiB


def test_no_two_sources_of_the_program_define_one_name() -> None:
    """The sources run in one namespace: a later source's name would replace an earlier one's under the
    functions that read it (``main`` is the one name meant to: ``repo_tool``'s runs)."""
    owners: dict[str, list[int]] = {}
    for i, source in enumerate(aci._SOURCES):
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            else:
                names = []
            for name in names:
                owners.setdefault(name, []).append(i)
    assert {name: found for name, found in owners.items() if len(found) > 1} == {"main": [3, len(aci._SOURCES) - 1]}


# --------------------------------------------------------------------------- search


def test_search_finds_regex_or_literal_text_library_first(repo: Path) -> None:
    text, status = repo_tool.search("parse_sum")
    assert status == 0 and text.startswith("3 match(es) of 'parse_sum' in 1 file(s):")
    assert "calcpkg/parser.py:15: def parse_sum(self):" in text
    literal, _ = repo_tool.search("parse_sum(")  # not a valid regex: searched as text
    assert "(as literal text)" in literal and "calcpkg/parser.py:27: return parser.parse_sum()" in literal
    anycase, _ = repo_tool.search("PARSEERROR")
    assert "ignoring case" in anycase and "calcpkg/parser.py:4:" in anycase
    both, _ = repo_tool.search("evaluate")
    assert both.index("calcpkg/") < both.index("tests/test_calc.py")
    assert repo_tool.search("no_such_name_anywhere") == ("No matches of 'no_such_name_anywhere' in 7 text files.\n", 1)


def test_search_is_capped_and_skips_binary_and_huge_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "many.py").write_text("".join(f"needle_{i} = {i}\n" for i in range(500)))
    (tmp_path / "blob.bin").write_bytes(b"needle\0" * 100)
    (tmp_path / "huge.txt").write_text("needle\n" * 200_000)
    monkeypatch.chdir(tmp_path)
    text, status = repo_tool.search("needle")
    assert status == 0 and text.startswith("500 match(es)") and "470 more matches not shown" in text
    assert "blob.bin" not in text and "huge.txt" not in text and len(text) < 3000


def test_search_through_the_sandbox(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("search", pattern="def walk"))
    assert out.exit_code == 0 and "calcpkg/evaluator.py:8: def walk(tree):" in out.observation
    assert out.tool_name == "search"
    typed = run_tool_call(sandbox, tool_call("bash", command="search walk"))  # the tool typed as a command
    assert typed.tool_name == "search" and "calcpkg/evaluator.py:5:" in typed.observation


# --------------------------------------------------------------------------- view windows


def big_module(lines: int = 2000) -> str:
    out = ['"""A big module."""\n']
    for i in range((lines - 1) // 4):
        out.append(f"def helper_{i}(x):\n    y = x + {i}\n    return y\n\n")
    return "".join(out)


def test_a_big_file_without_a_window_shows_its_outline_and_first_lines(tmp_path: Path) -> None:
    text = big_module()
    assert len(text.splitlines()) == 1997
    out = file_view.view("big.py", text)
    assert out.startswith("big.py has 1997 lines, too many to show at once.\nIts classes and functions")
    assert "   2| def helper_0(x):" in out and "... (" in out  # the outline, cut
    assert "Lines 1-30:" in out and "To see more, call view_file with start_line and end_line" in out
    assert len(out) < 5000


def test_a_window_shows_its_lines_and_how_to_go_on() -> None:
    text = big_module()
    out = file_view.view("big.py", text, 1001, 1010)
    assert out.startswith("big.py, lines 1001-1010 of 1997:\n1001| ")
    assert out.endswith("(More: view_file big.py with start_line=1011.)\n")
    wide = file_view.view("big.py", text, 1, 1997)
    assert "lines 1-100 of 1997 (at most 100 lines at a time)" in wide and "101| " not in wide
    assert file_view.view("big.py", text, 5000, 5010) == "big.py has only 1997 lines: ask for lines within 1-1997.\n"
    assert file_view.view("big.py", text, 1995, 2100).endswith("(End of file.)\n")
    long_lines = "".join("x = '" + "y" * 900 + "'\n" for _ in range(80))
    assert len(file_view.view("long.py", long_lines, 1, 80)) < 7000  # lines cut, window cut by characters


def test_view_file_takes_a_window_and_path_colon_line(sandbox: Sandbox) -> None:
    out = run_tool_call(sandbox, tool_call("view_file", path="calcpkg/parser.py", start_line="15", end_line=17))
    assert out.exit_code == 0 and out.observation.startswith("calcpkg/parser.py, lines 15-17 of 27:")
    assert "  15|     def parse_sum(self):" in out.observation
    at = run_tool_call(sandbox, tool_call("view_file", path="calcpkg/parser.py:25", start_line=0, end_line=0))
    assert "calcpkg/parser.py, lines 15-27 of 27:" in at.observation
    bad = run_tool_call(sandbox, tool_call("view_file", path="calcpkg/parser.py", start_line="ten", end_line=0))
    assert bad.format_error and "start_line must be a whole number" in bad.observation
    plain = run_tool_call(sandbox, tool_call("view_file", path="calcpkg/parser.py"))  # no window given
    assert plain.exit_code == 0 and "  27|     return parser.parse_sum()" in plain.observation


# --------------------------------------------------------------------------- from the symptom to the code


def run_check(sandbox: Sandbox) -> str:
    return sandbox.run("python3 -m unittest tests.test_calc 2>&1").output


def test_failures_are_read_from_unittest_and_pytest_output() -> None:
    output = textwrap.dedent('''\
        ======================================================================
        FAIL: test_chain (tests.test_calc.CalcTest.test_chain)
        ----------------------------------------------------------------------
        Traceback (most recent call last):
          File "/w/tests/test_calc.py", line 8, in test_chain
            self.assertEqual(evaluate("10 - 4 - 3"), 3)
        AssertionError: 9 != 3

        ERROR: test_x (tests.test_calc.CalcTest)
        Traceback (most recent call last):
          File "/w/tests/test_calc.py", line 11, in test_x
            divide(1, 0)
          File "/w/calcpkg/evaluator.py", line 20, in ratio
            return a / b
        ZeroDivisionError: division by zero
        ''')
    f = read_failures(output)
    assert f.tests == ["tests.test_calc.CalcTest.test_chain", "tests.test_calc.CalcTest.test_x"]
    assert f.tracebacks == [[("/w/tests/test_calc.py", 8)], [("/w/tests/test_calc.py", 11), ("/w/calcpkg/evaluator.py", 20)]]
    assert failures_line(f) == "Failing tests (2): tests.test_calc.CalcTest.test_chain, tests.test_calc.CalcTest.test_x."
    pytest_out = "FAILED tests/test_calc.py::CalcTest::test_chain - AssertionError\ncalcpkg/evaluator.py:20: ZeroDivisionError\n"
    p = read_failures(pytest_out)
    assert p.tests == ["tests/test_calc.py::CalcTest::test_chain"] and p.tracebacks == [[("calcpkg/evaluator.py", 20)]]


def test_an_exception_in_the_library_shows_the_functions_it_passed(sandbox: Sandbox) -> None:
    output = run_check(sandbox)
    annotated = annotate(sandbox, output)
    text = annotated.text
    assert "Failing tests (2): " in text and "tests.test_calc.CalcTest.test_divide" in text
    assert "The library code on the failing path (innermost first" in text
    assert "calcpkg/evaluator.py, def ratio (lines 19-20), the failure passes line 20:\n  19| def ratio(a, b):\n" \
           "  20|     return a / b\n" in text
    assert "calcpkg/evaluator.py, def divide" in text
    assert "unittest/case.py" not in text.split("Failing tests")[1]  # no standard library, no test code shown
    assert annotated.code_files == ("calcpkg/evaluator.py",)


def test_a_failed_assertion_shows_the_library_code_the_test_calls(repo: Path) -> None:
    frames = [[[str(repo / "tests/test_calc.py"), 8]]]
    text = failing_code.failing_code(frames)
    assert text.startswith("The failing test, tests/test_calc.py (read-only), lines 7-8:\n   7|     def test_chain")
    assert "\nThe failing tests call this library code" in text
    # evaluate (re-exported by the package) is a short wrapper: the functions it calls follow, parse's too
    assert "calcpkg/evaluator.py, def evaluate (lines 4-5), called by tests/test_calc.py:8:" in text
    assert "calcpkg/parser.py, def parse (lines 25-27), called by evaluate:" in text
    assert "def Parser.parse_sum (lines 15-22), called by parse:" in text
    assert "  21|             node = (op, node, self.parse_sum())" in text
    assert len(text) <= failing_code.FAILURE_CHARS + 200
    assert failing_code.failing_code([[["/usr/lib/python3/unittest/case.py", 3]]]) == ""  # nothing of the repository


def test_an_assertion_on_an_object_shows_its_constructor_and_what_that_calls(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ptr.py").write_text(
        "class Pointer:\n"
        "    def __init__(self, text):\n"
        "        self.parts = [unescape(p) for p in text.split('/')[1:]]\n"
        "\n\n"
        "def unescape(s):\n"
        "    return s.replace('~0', '~').replace('~1', '/')\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ptr.py").write_text(
        "import unittest\n"
        "from ptr import Pointer\n"
        "\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_parts(self):\n"
        "        pointer = Pointer('/~01')\n"
        "        self.assertEqual(pointer.parts, ['~1'])\n")
    monkeypatch.chdir(tmp_path)
    text = failing_code.failing_code([[[str(tmp_path / "tests" / "test_ptr.py"), 8]]])
    # The assertion reads ``pointer``: the line that made it is on the failing path, and so is what
    # calling the class runs, and what that calls.
    assert "lines 6-8:\n   6|     def test_parts(self):\n   7|         pointer = Pointer('/~01')\n" in text
    assert "ptr.py, def Pointer.__init__ (lines 2-3), called by tests/test_ptr.py:8:" in text
    assert "ptr.py, def unescape (lines 6-7), called by Pointer.__init__:" in text


def test_a_long_docstring_is_folded_and_the_line_numbers_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_text('def f(x):\n    """Doc.\n\n    >>> f(1)\n    2\n    """\n    return x - 1\n')
    monkeypatch.chdir(tmp_path)
    text = failing_code.failing_code([[[str(tmp_path / "m.py"), 7]]])
    assert '   2|     """Doc.\n      ... (docstring to line 6)\n   7|     return x - 1\n' in text
    assert ">>> f(1)" not in text


def test_a_long_function_is_shown_as_a_window_around_the_failing_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(200))
    (tmp_path / "long.py").write_text(f"def long():\n{body}    raise ValueError(x1)\n")
    monkeypatch.chdir(tmp_path)
    text = failing_code.failing_code([[[str(tmp_path / "long.py"), 202]]])
    numbered = [line for line in text.splitlines() if "| " in line]
    assert len(numbered) == failing_code.FUNCTION_LINES and " 202|     raise ValueError(x1)" in text


def test_a_long_unittest_report_is_summarized_and_outputs_are_capped() -> None:
    block = ("FAIL: test_{i} (t.T.test_{i})\n" + "-" * 70 + "\nTraceback (most recent call last):\n"
             '  File "t.py", line {i}, in test_{i}\n    self.fail()\nAssertionError: case {i} wrong\n\n')
    report = "FF\n" + "".join("=" * 70 + "\n" + block.format(i=i) for i in range(12)) + "-" * 70 + \
        "\nRan 12 tests in 0.1s\n\nFAILED (failures=12)\n"
    short = summarize_unittest(report)
    assert len(short) < len(report) and "[10 more failures, each cut to its test and its error:]" in short
    assert "FAIL: test_11 (t.T.test_11)\n    AssertionError: case 11 wrong" in short
    assert short.count("Traceback") == 2 and short.endswith("Ran 12 tests in 0.1s\n\nFAILED (failures=12)\n")
    assert summarize_unittest("short") == "short"
    capped = cap_text("a" * 5000 + "b" * 5000, 900)
    assert capped.startswith("a" * 600) and capped.endswith("b" * 300) and "9100 characters of output left out" in capped


def test_the_map_shows_the_small_modules_a_task_names_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "temps.py").write_text("def to_f(c):\n    return c * 9 / 5 + 23\n")
    (tmp_path / "check.py").write_text("import temps\nassert temps.to_f(0) == 32\n")
    (tmp_path / "check.py").chmod(0o444)
    monkeypatch.chdir(tmp_path)
    text = repo_tool.repo_map(".", budget=2000, focus=["check", "temps"])
    assert "temps.py:\n   1| def to_f(c):\n   2|     return c * 9 / 5 + 23\n" in text
    assert "check.py:" not in text  # read-only: listed, never shown
    for m in range(6):  # many modules, none named: only the map
        (tmp_path / f"mod{m}.py").write_text("def f():\n    pass\n")
    assert "temps.py:\n" not in repo_tool.repo_map(".", budget=2000, focus=["run"])


def test_nearby_rewrite_guesses_only_a_clear_single_line() -> None:
    from agent_engine.agent.text_match import nearby_rewrite

    window = ["def f(a, b):", "    return a - b", "", "def g(a, b):", "    return a * b"]
    assert nearby_rewrite(window, ["return a + b"]) is None  # two lines alike: no guess
    assert nearby_rewrite(window[:3], ["return a + b"]) == [(1, "    return a + b")]
    assert nearby_rewrite(window[:3], ["return a - b"]) is None  # already so: nothing to rewrite
    assert nearby_rewrite(window[:3], ["x = 1", "return a + b"]) is None  # one line only
