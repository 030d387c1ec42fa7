"""Mutants screened in one op (``agent_engine.agent.mutant_screen``, the ``screen_mutants`` op): each written,
judged by the failing tests alone in a child, undone unless it passes; a hanging one killed; the budget kept."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import repo_sandbox

from agent_engine.agent.aci import MAX_COMMAND_CHARS, program_command_chars, run_program
from agent_engine.agent.job_config import AgentJobRecord
from agent_engine.agent.mutant_trials import MutantTrials
from agent_engine.agent.mutants import Mutant
from agent_engine.agent.rewrite_answers import Suspect
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.stage_sandbox import StageSandbox

pytestmark = pytest.mark.core

FAILING = ["tests.test_rate.RateTest.test_half"]
SOURCE = textwrap.dedent('''\
    def rate(total, part):
        return part * 100 // total * 2
    ''')
FILES = {
    "calc/__init__.py": "",
    "calc/rate.py": SOURCE,
    "tests/__init__.py": "",
    "tests/test_rate.py": textwrap.dedent('''\
        import unittest

        from calc.rate import rate


        class RateTest(unittest.TestCase):
            def test_half(self):
                self.assertEqual(rate(10, 5), 50)

            def test_none(self):
                self.assertEqual(rate(10, 0), 0)
        '''),
    "check.py": "import sys, unittest\nsys.exit(not unittest.main(module=None, argv=['x', 'discover', '-s', 'tests', "
                "'-t', '.'], exit=False).result.wasSuccessful())\n",
}


@pytest.fixture
def calc(tmp_path: Path) -> Iterator[Sandbox]:
    with repo_sandbox(tmp_path, FILES, read_only=("tests/test_rate.py",)) as sandbox:
        yield sandbox


def edit(new_body: str, old: str = SOURCE.rstrip("\n")) -> dict[str, object]:
    return {"path": "calc/rate.py", "first": 1, "last": 2, "old": old, "new": f"def rate(total, part):\n{new_body}"}


def screen(sandbox: Sandbox, edits: list[dict[str, object]], seconds: float = 5.0,
           budget: float = 40.0) -> dict[str, object]:
    op = {"op": "screen_mutants", "argv": ["check.py"], "failing": FAILING, "ran": 1, "edits": edits,
          "seconds": seconds, "budget": budget}
    result = run_program(sandbox, op)
    return json.loads(result.output.strip().splitlines()[-1])


def test_the_first_mutant_that_passes_the_failing_tests_stays_written_and_the_rest_are_undone(calc: Sandbox) -> None:
    module = Path(calc.workdir_path) / "calc" / "rate.py"
    edits = [edit("    return part * 100 // total * 3"),  # still fails: undone
             edit("    return part", old="def rate(a, b):\n    return 0"),  # no longer reads as shown: refused
             edit("    while True:\n        pass"),  # never ends: killed at `seconds`
             edit("    return part * 100 // total"),  # the fix
             edit("    return part * 100 // total * 1")]  # never tried
    assert screen(calc, edits, seconds=3.0) == {"passed": 3, "tried": 4, "failed_filter": 2}
    assert module.read_text() == "def rate(total, part):\n    return part * 100 // total\n"
    assert calc.run("python3 check.py").exit_code == 0
    assert run_program(calc, {"op": "undo"}).exit_code == 0 and module.read_text() == SOURCE
    assert not list(Path(calc.workdir_path).rglob("*.pyc"))  # each child imported the edit afresh, wrote none


def test_no_mutant_passing_leaves_the_repository_as_it_was(calc: Sandbox) -> None:
    module = Path(calc.workdir_path) / "calc" / "rate.py"
    wrong = [edit("    return part * 100 // total * 3"), edit("    return part * 10 // total * 2")]
    assert screen(calc, wrong) == {"passed": None, "tried": 2, "failed_filter": 2}
    assert module.read_text() == SOURCE
    assert run_program(calc, {"op": "undo"}).exit_code == 1  # nothing left to undo


def test_no_mutant_is_started_past_the_op_s_budget(calc: Sandbox) -> None:
    fix = edit("    return part * 100 // total")
    assert screen(calc, [edit("    return part * 100 // total * 3"), fix], seconds=5.0, budget=1.0)["tried"] == 1
    assert (Path(calc.workdir_path) / "calc" / "rate.py").read_text() == SOURCE


def test_the_host_screens_in_batches_that_fit_a_command_line_and_finds_a_late_fix(calc: Sandbox) -> None:
    suspect = Suspect("calc/rate.py", "rate", 1, 2, SOURCE.rstrip("\n"))
    padding = "    # " + "x" * 5000 + "\n"  # each wrong mutant carries a long comment: more than one op's worth
    wrong = [Mutant(f"def rate(total, part):\n{padding}    return part * 100 // total * {k}", 1, f"wrong {k}")
             for k in range(3, 28)]
    fix = Mutant("def rate(total, part):\n    return part * 100 // total", 1, "the fix")
    plan = [(suspect, m) for m in [*wrong, fix]]
    record = AgentJobRecord("job", "job", 0.0)
    trials = MutantTrials(StageSandbox(calc, "python3 check.py"), record, [], 0.0)
    first = trials.batch(plan, FAILING)
    assert 1 <= len(first) < len(plan)  # the plan takes more than one op
    assert program_command_chars(trials.screen_op(first, FAILING, 1, 3.0)) < MAX_COMMAND_CHARS
    found, filtered = asyncio.run(trials.screened(plan, FAILING, 1, 3.0, 30.0))
    assert found == (suspect, fix) and filtered == len(wrong) and record.mutants == len(plan)
    assert (Path(calc.workdir_path) / "calc" / "rate.py").read_text() == fix.text + "\n"
