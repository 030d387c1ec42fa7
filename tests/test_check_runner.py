"""The judge's check runner on its own: what it collects, how it names tests, what it reports.

The runner is run as a library task's ``check.py`` (``python3 check.py [PATH ...]``) and as the judge
runs it (``python3 -I -B -c SOURCE --judge-request-on-stdin`` with the request on standard input).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_engine.agent import check_runner
from agent_engine.agent.judge import RUNNER_SOURCE

pytestmark = pytest.mark.core

TESTS = {
    "tests/__init__.py": "",
    "tests/test_cases.py": """
import unittest
from lib import double

class DoubleTest(unittest.TestCase):
    def test_two(self):
        self.assertEqual(double(2), 4)

    def test_subtests(self):
        for x in (1, 2, 3):
            with self.subTest(x=x):
                self.assertEqual(double(x), 2 * x)

    @unittest.skip("not today")
    def test_skipped(self):
        raise AssertionError
""",
    "tests/test_plain.py": """
from lib import double

def test_zero():
    assert double(0) == 0

def helper_not_a_test():
    raise AssertionError

class TestPlain:
    def setup_method(self, method):
        self.base = 5

    def test_five(self):
        assert double(self.base) == 10

class NotCollected:
    def test_never(self):
        raise AssertionError
""",
}


def _repo(tmp_path: Path, double: str = "x * 2") -> Path:
    repo = tmp_path / "repo"
    for rel, text in TESTS.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "lib.py").write_text(f"def double(x):\n    return {double}\n")
    shutil.copy(check_runner.__file__, repo / "check.py")
    return repo


def _judge_run(repo: Path, request: dict[str, object]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-I", "-B", "-c", RUNNER_SOURCE, check_runner.JUDGE_FLAG], cwd=repo,
                          input=json.dumps({"nonce": "n0", **request}) + "\n", capture_output=True, text=True,
                          timeout=60, check=False)
    mark = check_runner.REPORT_MARK + "n0 "
    assert mark in done.stdout, done.stdout + done.stderr
    return json.loads(done.stdout[done.stdout.rindex(mark) + len(mark):].splitlines()[0])


def test_as_a_script_it_runs_unittest_and_plain_tests_and_exits_by_their_outcome(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    done = subprocess.run([sys.executable, "check.py"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout and "1 skipped" in done.stdout
    broken = _repo(tmp_path / "b", double="x + 2")
    done = subprocess.run([sys.executable, "check.py"], cwd=broken, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "FAILED tests/test_plain.py::test_zero" in done.stdout


def test_the_judge_request_reports_each_test_by_its_pytest_id(tmp_path: Path) -> None:
    repo = _repo(tmp_path, double="x * 2 if x != 3 else 7")
    report = _judge_run(repo, {"mode": "tests", "paths": ["tests"], "must_pass": [
        "tests/test_cases.py::DoubleTest::test_two", "tests/test_plain.py::TestPlain::test_five",
        "tests/test_plain.py::test_missing"]})
    assert report["counts"] == {"passed": 3, "failed": 1, "skipped": 1}
    assert report["failing"] == ["tests/test_cases.py::DoubleTest::test_subtests"]
    assert report["must_pass_missing"] == ["tests/test_plain.py::test_missing"]
    assert report["tampered"] == []


def test_a_test_file_that_cannot_import_is_reported(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "tests" / "test_broken.py").write_text("import lib\nlib.missing\n")
    report = _judge_run(repo, {"mode": "tests", "paths": ["tests"]})
    assert report["n_broken_files"] == 1 and "AttributeError" in str(report["broken_files"])


def test_script_mode_tells_the_checks_exit_from_the_code_under_tests(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "check_script.py").write_text("import sys\nfrom lib import double\nsys.exit(0 if double(2) == 4 else 3)\n")
    report = _judge_run(repo, {"mode": "script", "argv": ["check_script.py"], "check_files": ["check_script.py"]})
    assert (report["exit"], report["exit_from"]) == (0, "check")
    (repo / "lib.py").write_text("import sys\nsys.exit(0)\n")
    report = _judge_run(repo, {"mode": "script", "argv": ["check_script.py"], "check_files": ["check_script.py"]})
    assert report["exit_from"] == "repository"


def test_bytecode_in_the_repository_is_never_imported(tmp_path: Path) -> None:
    repo = _repo(tmp_path, double="x + 2")
    fixed = tmp_path / "fixed.py"
    fixed.write_text("def double(x):\n    return x * 2\n")
    subprocess.run([sys.executable, "-c", f"import py_compile; py_compile.compile({str(fixed)!r}, "
                    f"cfile={str(repo / 'lib.pyc')!r})"], check=True)
    (repo / "lib.py").unlink()
    report = _judge_run(repo, {"mode": "tests", "paths": ["tests"]})
    assert report["n_broken_files"] == 2  # no lib.py: both test files fail to import, lib.pyc ignored
