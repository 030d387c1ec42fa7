"""Repair by function rewrites: the suspects the failing tests point to, the rewrite op, and the stage.

The suspects and the rewrite run as the real tool program in a real sandbox; the stage runs through
the real runner and judge against a scripted model (``agent_fakes.FakeServer``).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fakes import FakeServer, answer

from agent_engine.agent.aci import run_program
from agent_engine.agent.job_runner import AgentRunResult, RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig
from agent_engine.agent.repair_tool import same_test
from agent_engine.agent.rewrites import (
    REWRITE_PASSED,
    RewritePolicy,
    Suspect,
    python_check_args,
    rewritten_function,
)
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import set_tasks
from agent_engine.agent.text_interface import SUBMIT_COMMAND

pytestmark = pytest.mark.core

TASK = next(t for t in set_tasks("builtin") if t.name == "add_operator")
SUSPECT = Suspect("calc.py", "add", 4, 6, 'def add(a, b):\n    """The sum of a and b."""\n    return a - b')


def fenced(code: str) -> str:
    return f"Here it is:\n```python\n{textwrap.dedent(code).strip()}\n```\n"


# --------------------------------------------------------------------------- answers and commands


def test_a_rewrite_is_read_from_the_fenced_block_and_indented_as_the_suspect() -> None:
    assert rewritten_function(fenced("def add(a, b):\n    return a + b"), SUSPECT) == (
        'def add(a, b):\n    """The sum of a and b."""\n    return a + b')
    method = Suspect("m.py", "Box.get", 3, 4, "    def get(self):\n        return self.x - 1")
    got = rewritten_function(fenced("class Box:\n    def get(self):\n        return self.x"), method)
    assert got == "    def get(self):\n        return self.x"


@pytest.mark.parametrize("reply", [
    "return a + b",  # no fenced block
    fenced("def add(a, b:\n    return a + b"),  # does not parse
    fenced("def sub(a, b):\n    return a + b"),  # another function
    fenced('def add(a, b):\n    """The sum of a and b."""\n\n    return a - b   '),  # the same code
])
def test_an_answer_that_rewrites_nothing_is_none(reply: str) -> None:
    assert rewritten_function(reply, SUSPECT) is None


def test_only_a_python_check_is_traced() -> None:
    assert python_check_args("python3 check.py tests") == ["check.py", "tests"]
    assert python_check_args("/usr/bin/python3.11 -m unittest") == ["-m", "unittest"]
    assert python_check_args("bash check.sh") == [] and python_check_args("python3 'unclosed") == []


def test_a_traced_test_is_the_test_a_report_names() -> None:
    traced = "tests.test_calc.CalcTest.test_add"
    assert same_test(traced, "tests/test_calc.py::CalcTest::test_add")
    assert same_test(traced, "tests.test_calc.CalcTest.test_add")
    assert not same_test(traced, "tests/test_calc.py::CalcTest::test_sub")


# --------------------------------------------------------------------------- in the sandbox

LIBRARY = {
    "shop/__init__.py": "",
    "shop/prices.py": textwrap.dedent('''\
        def fmt(cents):
            return f"{cents // 100}.{cents % 100:02d}"


        def discounted(cents, percent):
            if percent > 100:
                raise ValueError(percent)
            return cents - cents * percent // 10


        def total(items):
            return sum(items)
        '''),
    "tests/__init__.py": "",
    "tests/test_prices.py": textwrap.dedent('''\
        import unittest

        from shop.prices import discounted, fmt, total


        class PricesTest(unittest.TestCase):
            def test_fmt(self):
                self.assertEqual(fmt(1234), "12.34")

            def test_total(self):
                self.assertEqual(fmt(total([100, 250])), "3.50")

            def test_discount(self):
                self.assertEqual(fmt(discounted(1000, 10)), "9.00")

            def test_no_discount(self):
                self.assertEqual(discounted(1000, 0), 1000)
        '''),
    "check.py": "import sys, unittest\nsys.exit(not unittest.main(module=None, argv=['x', 'discover', '-s', 'tests', "
                "'-t', '.'], exit=False).result.wasSuccessful())\n",
}


@pytest.fixture
def shop(tmp_path: Path) -> Any:
    for rel, text in LIBRARY.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    sandbox = Sandbox.create(str(tmp_path), timeout=60)
    (Path(sandbox.workdir_path) / "tests" / "test_prices.py").chmod(0o444)
    yield sandbox
    sandbox.close()


def test_the_function_only_the_failing_test_runs_is_the_first_suspect(shop: Sandbox) -> None:
    out = shop.run("python3 check.py")
    assert out.exit_code == 1 and "test_discount" in out.output
    found = json.loads(run_program(shop, {"op": "suspects", "argv": ["check.py"], "limit": 3,
                                          "failing": ["tests.test_prices.PricesTest.test_discount"]}).output)
    assert [d["name"] for d in found][:1] == ["discounted"]
    assert found[0]["failed"] == 1 and found[0]["passed"] == 1 and found[0]["first"] == 5
    assert found[0]["text"].startswith("def discounted(cents, percent):")
    assert all(d["path"] == "shop/prices.py" for d in found)  # never a test file
    assert len(found) <= 3 and "total" not in [d["name"] for d in found]  # run by passing tests only


def test_a_rewrite_writes_only_lines_that_still_read_as_shown(shop: Sandbox) -> None:
    text = (Path(shop.workdir_path) / "shop/prices.py").read_text().split("\n")
    old, new = "\n".join(text[4:8]), "\n".join(text[4:7] + ["    return cents - cents * percent // 100"])
    stale = run_program(shop, {"op": "rewrite", "path": "shop/prices.py", "first": 4, "last": 7, "old": old,
                               "new": new})
    assert stale.exit_code == 1 and "changed since" in stale.output
    broken = run_program(shop, {"op": "rewrite", "path": "shop/prices.py", "first": 5, "last": 8, "old": old,
                                "new": "def discounted(:"})
    assert broken.exit_code == 1
    done = run_program(shop, {"op": "rewrite", "path": "shop/prices.py", "first": 5, "last": 8, "old": old,
                              "new": new})
    assert done.exit_code == 0 and shop.run("python3 check.py").exit_code == 0
    assert run_program(shop, {"op": "undo"}).exit_code == 0 and shop.run("python3 check.py").exit_code == 1
    refused = run_program(shop, {"op": "rewrite", "path": "tests/test_prices.py", "first": 1, "last": 1,
                                 "old": "import unittest", "new": "import os"})
    assert refused.exit_code == 1


# --------------------------------------------------------------------------- the stage


class Rewriter(FakeServer):
    """Rewrite prompts get ``rewrites`` in turn (greedy first); the agent's calls get its script."""

    def __init__(self, rewrites: list[str]) -> None:
        super().__init__([answer(SUBMIT_COMMAND)])
        self.rewrites = rewrites
        self.asked = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.method == "POST" and request.content else None
        if body is not None and "give the whole function" in body["messages"][-1]["content"]:
            self.requests.append((request.method, request.url.path, dict(request.headers), body))
            text = self.rewrites[min(self.asked, len(self.rewrites) - 1)]
            self.asked += 1
            usage = {"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 40}}
            return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                             "usage": usage})
        return super().handle(request)


def _run(server: FakeServer, samples: int = 3) -> AgentRunResult:
    options = RunOptions("http://fake", AgentConfig(step_limit=2, max_tokens=32), concurrency=1, command_timeout=20,
                         progress=False, job_id_prefix="t-", transport=server.transport(),
                         rewrites=RewritePolicy(samples, functions=2))
    return run_agent_jobs_sync([TASK], options)


WRONG = fenced('def add(a, b):\n    """The sum of a and b."""\n    return a * b')
RIGHT = fenced('def add(a, b):\n    """The sum of a and b."""\n    return a + b')


def test_a_sampled_rewrite_that_passes_the_check_solves_the_job_before_the_agent() -> None:
    server = Rewriter([WRONG, WRONG, RIGHT])
    result = _run(server)
    job = result.results[0].job
    assert (job.solved, job.exit_status, job.attempts) == (True, REWRITE_PASSED, 1)
    assert result.summary["solved_by_rewrites"] == 1
    bodies = server.chat_bodies()
    assert len(bodies) == 3  # greedy (wrong: undone), sampled (the same rewrite: not tried again), sampled (right)
    assert bodies[0]["temperature"] == 0 and "seed" not in bodies[0]
    assert all(b["temperature"] > 0 for b in bodies[1:]) and bodies[1]["seed"] != bodies[2]["seed"]
    assert {b["job_id"] for b in bodies} == {"t-0"} and not any(b.get("is_last_step") for b in bodies)
    assert all(b["messages"] == bodies[0]["messages"] for b in bodies)  # one prompt: one cached prefix
    assert "def add(a, b):" in bodies[0]["messages"][-1]["content"]
    assert server.deletes() == ["/v1/jobs/t-0"]


def test_a_stage_that_fails_leaves_the_agent_a_fresh_repository() -> None:
    server = Rewriter([WRONG])
    result = _run(server, samples=2)
    whole = result.results[0]
    assert whole.job.attempts == 2 and whole.job.solved is False  # the stage, then the agent's attempt
    assert result.summary["solved_by_rewrites"] == 0
    agent_calls = [b for b in server.chat_bodies() if "give the whole function" not in b["messages"][-1]["content"]]
    assert len(agent_calls) == 1 and server.deletes() == ["/v1/jobs/t-0"]


def test_the_stage_spreads_its_answers_over_the_suspects_it_found() -> None:
    policy = RewritePolicy(4, functions=4)
    assert [policy.samples_each(n) for n in (0, 1, 2, 3, 4)] == [0, 12, 8, 6, 4]
    assert not RewritePolicy().enabled and policy.enabled
    with pytest.raises(ValueError):
        RewritePolicy(-1)


def test_the_model_is_shown_no_docstring_and_the_rewrite_keeps_the_original_one() -> None:
    method = Suspect("m.py", "Box.get", 3, 8, '    def get(self):\n        """Return x.\n\n        ``x()`` as is.\n'
                     '        """\n        return self.x - 1')
    from agent_engine.agent.rewrites import shown_source
    assert shown_source(method) == "def get(self):\n    return self.x - 1"
    got = rewritten_function("It is off by one.\n" + fenced('def get(self):\n    """Other."""\n    return self.x'),
                             method)
    assert got == '    def get(self):\n        """Return x.\n\n        ``x()`` as is.\n        """\n        return self.x'
    assert rewritten_function(fenced("def get(self):\n    return self.x - 1"), method) is None  # the same code


def test_a_kept_rewrite_moves_the_later_suspects_of_its_file() -> None:
    from agent_engine.agent.rewrites import shifted
    kept = Suspect("a.py", "f", 10, 12, "def f():\n    x = 1\n    return x")
    later = [Suspect("a.py", "g", 20, 22, "g"), Suspect("b.py", "h", 20, 22, "h"), Suspect("a.py", "e", 2, 4, "e")]
    moved = shifted(later, kept, "def f():\n    return 1")
    assert [(s.first, s.last) for s in moved] == [(19, 21), (20, 22), (2, 4)]
