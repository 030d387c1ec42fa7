"""Repair by function rewrites: the suspects the failing tests point to, the rewrite op, and the stage.

The suspects and the rewrite run as the real tool program in a real sandbox; the stage runs through
the real runner and judge against a scripted model (``agent_fakes.FakeServer``).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fakes import FakeServer, answer
from sandbox_helpers import repo_sandbox

from agent_engine.agent.aci import run_program
from agent_engine.agent.job_runner import AgentRunResult, RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig
from agent_engine.agent.repair_tool import LONG_LINES, same_test
from agent_engine.agent.rewrite_answers import (
    Suspect,
    asked_lines,
    printed_names,
    printed_notes,
    probe_lines,
    replaced_line,
    rewritten_function,
)
from agent_engine.agent.rewrite_prompts import suspect_prompt
from agent_engine.agent.rewrites import (
    MUTANT_PASSED,
    REWRITE_PASSED,
    RewritePolicy,
)
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.stage_sandbox import python_check_args
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
    with repo_sandbox(tmp_path, LIBRARY, read_only=("tests/test_prices.py",)) as sandbox:
        yield sandbox


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


def test_a_function_with_dead_code_the_failing_test_runs_ranks_first(tmp_path: Path) -> None:
    line = '    return f"{cents // 100}.{cents % 100:02d}"\n'
    dead = LIBRARY["shop/prices.py"].replace(line, line + "    cents = int(cents)\n")
    with repo_sandbox(tmp_path, {**LIBRARY, "shop/prices.py": dead}) as sandbox:
        found = json.loads(run_program(sandbox, {"op": "suspects", "argv": ["check.py"], "limit": 3,
                                                 "failing": ["tests.test_prices.PricesTest.test_discount"]}).output)
    assert [d["name"] for d in found][:2] == ["fmt", "discounted"]  # Ochiai alone puts ``discounted`` first


def test_a_nested_function_of_a_holder_too_long_to_list_is_a_suspect_alone(tmp_path: Path) -> None:
    filler = "".join(f"    step{i} = {i}\n" for i in range(LONG_LINES))
    factory = ("def make_discount():\n" + filler + "    def discounted(cents, percent):\n"
               "        return cents - cents * percent // 10\n    return discounted\n\n\n"
               "def fmt(cents):\n    return f\"{cents // 100}.{cents % 100:02d}\"\n\n\n"
               "def total(items):\n    return sum(items)\n\n\ndiscounted = make_discount()\n")
    with repo_sandbox(tmp_path, {**LIBRARY, "shop/prices.py": factory}) as sandbox:
        found = json.loads(run_program(sandbox, {"op": "suspects", "argv": ["check.py"], "limit": 3,
                                                 "failing": ["tests.test_prices.PricesTest.test_discount"]}).output)
    assert found[0]["name"] == "make_discount.discounted" and found[0]["first"] == LONG_LINES + 2
    assert found[0]["text"].startswith("    def discounted(cents, percent):")
    assert "make_discount" not in [d["name"] for d in found]  # too long to list


def test_a_suspect_carries_what_a_linter_sees_and_its_prompt_shows_it(tmp_path: Path) -> None:
    lost = LIBRARY["shop/prices.py"].replace("    return cents - cents * percent // 10\n", "    return cents - off\n")
    assert lost != LIBRARY["shop/prices.py"]
    with repo_sandbox(tmp_path, {**LIBRARY, "shop/prices.py": lost}) as sandbox:
        found = json.loads(run_program(sandbox, {"op": "suspects", "argv": ["check.py"], "limit": 3,
                                                 "failing": ["tests.test_prices.PricesTest.test_discount"]}).output)
    by_name = {d["name"]: d for d in found}
    note = "`return cents - off` reads `off`, which nothing assigns (not this function, its module or the builtins)"
    assert by_name["discounted"]["notes"] == [[8, note]] and all(not d.get("notes") for d in found[1:])
    assert by_name["discounted"]["lost"] == ["off"]  # the mutants may borrow or initialize it
    suspect = Suspect("shop/prices.py", "discounted", 5, 8, by_name["discounted"]["text"], notes=((8, note),))
    assert asked_lines(suspect) == [8, 6, 7]  # the noted line first, then the short function's code lines
    user = suspect_prompt("Discounts crash.", "FAIL: test_discount", suspect, "/repo")[-1]["content"]
    source_end = user.index("```\n\n") + 5
    assert user[source_end:].startswith("A linter notes in this function (a line may be missing there):\n- " + note)
    plain = suspect_prompt("Discounts crash.", "FAIL: test_discount", replace(suspect, notes=()), "/repo")
    assert "linter" not in plain[-1]["content"]


def test_the_notes_a_sandbox_prints_are_kept_to_what_a_prompt_may_hold() -> None:
    printed = [[1, "a"], "b", [2, ""], [3, "c" * 10_000], [True, "d"], [4, "e"], [5, "f"], [6, "g"], [7, "h"]]
    assert printed_notes(printed) == ((1, "a"), (4, "e"), (5, "f"), (6, "g"))
    assert printed_notes("not a list") == () and printed_notes(None) == ()
    assert printed_names(["off", "not a name", 3, "x1"]) == ("off", "x1") and printed_names({"off": 1}) == ()


def test_a_long_function_is_asked_about_the_lines_its_notes_point_at() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(90))
    long = Suspect("m.py", "f", 10, 101, "def f():\n" + body + "    return y", kind="lines",
                   notes=((101, "`return y` reads `y`, which nothing assigns"), (3, "outside the function")))
    assert probe_lines(long) == [] and asked_lines(long) == [101]
    messages = suspect_prompt("Broken.", "FAIL: test_f", long, "/repo", line=101)
    assert messages[-1]["content"].endswith("The bug is in this line: `return y`. Say in one sentence what is wrong "
                                            "with it, then give the line fixed (or a few lines, when one is missing "
                                            "there) in one ```python block.")
    fixed = replaced_line("`y` is never set.\n```python\ny = x89\nreturn y\n```", long, 101)
    assert fixed is not None and fixed.endswith("    x89 = 89\n    y = x89\n    return y")


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


def test_the_failing_tests_run_alone_and_say_whether_they_pass_now(shop: Sandbox) -> None:
    failing = ["tests.test_prices.PricesTest.test_discount"]

    def outcome(names: list[str]) -> object:
        return json.loads(run_program(shop, {"op": "failing_tests", "argv": ["check.py"], "failing": names}).output)

    assert outcome(failing) == {"ran": 1, "failed": 1}  # the other three tests never ran
    # no bytecode left behind: a same-size mutant written within the second would import it stale
    assert not list(Path(shop.workdir_path).rglob("*.pyc"))
    assert outcome([]) is None
    assert outcome(["tests/test_prices.py::PricesTest::test_fmt"]) == {"ran": 1, "failed": 0}
    prices = Path(shop.workdir_path) / "shop/prices.py"
    prices.write_text(prices.read_text().replace("percent // 10\n", "percent // 100\n"))
    assert outcome(failing) == {"ran": 1, "failed": 0}
    assert json.loads(run_program(shop, {"op": "failing_tests", "argv": ["-c", "pass"], "failing": failing}).output) is None


# --------------------------------------------------------------------------- the stage


LINE_QUESTION = "The bug is in this line: "
FAILING = "<the server fails this call>"


class Rewriter(FakeServer):
    """Rewrite prompts get ``rewrites`` in turn (greedy first); a question about one line gets ``lines``'
    answer for that line's text (else no block); the agent's calls get its script."""

    def __init__(self, rewrites: list[str], lines: dict[str, str] | None = None) -> None:
        super().__init__([answer(SUBMIT_COMMAND)])
        self.rewrites = rewrites
        self.lines = lines or {}
        self.asked = 0
        self.line_questions: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.method == "POST" and request.content else None
        question = body["messages"][-1]["content"] if body is not None else ""
        if LINE_QUESTION in question:
            line = question.split(LINE_QUESTION, 1)[1].split("`")[1]
            self.line_questions.append(line)
            usage = {"prompt_tokens": 50, "completion_tokens": 9}
            return httpx.Response(200, json={"choices": [{"message": {"content": self.lines.get(line, "No idea.")},
                                                          "finish_reason": "stop"}], "usage": usage})
        if body is not None and "give the whole function" in question:
            self.requests.append((request.method, request.url.path, dict(request.headers), body))
            text = self.rewrites[min(self.asked, len(self.rewrites) - 1)]
            self.asked += 1
            if text == FAILING:
                return httpx.Response(503, json={"error": {"message": "overloaded", "type": "server_error"}})
            usage = {"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 40}}
            return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                             "usage": usage})
        return super().handle(request)


def _run(server: FakeServer, samples: int = 3, mutants: int = 0) -> AgentRunResult:
    options = RunOptions("http://fake", AgentConfig(step_limit=2, max_tokens=32), concurrency=1, command_timeout=20,
                         progress=False, job_id_prefix="t-", transport=server.transport(),
                         rewrites=RewritePolicy(samples, functions=2, mutants=mutants))
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
    # the first of two suspects gets a double share of 2 x 3 answers in two rounds: from the prompt, greedy
    # (wrong: undone) and sampled (the same rewrite: not tried again); then (after its one code line was asked
    # about alone: no answer) from the follow-up showing the failed try, greedy (right: the stage ends) and sampled
    assert len(bodies) == 4 and server.line_questions == ["return a - b"]
    assert [b["temperature"] == 0 for b in bodies] == [True, False, True, False] and "seed" not in bodies[0]
    assert bodies[1]["seed"] != bodies[3]["seed"]
    assert {b["job_id"] for b in bodies} == {"t-0"} and not any(b.get("is_last_step") for b in bodies)
    prompt = bodies[0]["messages"]
    assert bodies[1]["messages"] == prompt and bodies[3]["messages"] == bodies[2]["messages"]
    follow_up = bodies[2]["messages"]
    assert follow_up[:len(prompt)] == prompt  # the follow-up extends the prompt: one cached prefix
    assert follow_up[len(prompt)] == {"role": "assistant", "content": WRONG}
    assert "still fails" in follow_up[-1]["content"] and "FAIL add" in follow_up[-1]["content"]
    assert "def add(a, b):" in bodies[0]["messages"][-1]["content"]
    assert server.deletes() == ["/v1/jobs/t-0"]


def test_a_mutant_that_passes_the_check_solves_the_job_before_any_model_call() -> None:
    server = Rewriter([WRONG])
    result = _run(server, samples=2, mutants=50)
    job, messages = result.results[0].job, result.results[0].messages
    assert (job.solved, job.exit_status, job.steps) == (True, MUTANT_PASSED, 0)
    assert 1 <= job.mutants <= 50 and job.jct is not None
    assert result.summary["solved_by_mutants"] == 1 and result.summary["solved_by_rewrites"] == 0
    assert server.chat_bodies() == [] and server.deletes() == ["/v1/jobs/t-0"]
    assert "-    return a - b\n+    return a + b" in messages[-1]["content"]


def test_mutants_alone_make_a_stage_that_asks_the_model_nothing() -> None:
    only_mutants = RewritePolicy(0, functions=2, mutants=3)
    assert only_mutants.enabled and only_mutants.samples_per_suspect(2) == []
    assert not RewritePolicy(0, mutants=0).enabled
    with pytest.raises(ValueError):
        RewritePolicy(1, mutants=-1)


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
    assert [policy.samples_per_suspect(n) for n in (0, 1, 2, 4)] == [[], [12], [11, 5], [7, 3, 3, 3]]
    assert RewritePolicy(1, functions=1).samples_per_suspect(3) == [1, 1, 1]  # each suspect asked at least once
    assert not RewritePolicy().enabled and policy.enabled and RewritePolicy().samples_per_suspect(2) == []
    with pytest.raises(ValueError):
        RewritePolicy(-1)


def test_the_model_is_shown_no_docstring_and_the_rewrite_keeps_the_original_one() -> None:
    method = Suspect("m.py", "Box.get", 3, 8, '    def get(self):\n        """Return x.\n\n        ``x()`` as is.\n'
                     '        """\n        return self.x - 1')
    from agent_engine.agent.rewrite_answers import shown_source
    assert shown_source(method) == "def get(self):\n    return self.x - 1"
    got = rewritten_function("It is off by one.\n" + fenced('def get(self):\n    """Other."""\n    return self.x'),
                             method)
    assert got == '    def get(self):\n        """Return x.\n\n        ``x()`` as is.\n        """\n        return self.x'
    assert rewritten_function(fenced("def get(self):\n    return self.x - 1"), method) is None  # the same code


def test_a_kept_rewrite_moves_the_later_suspects_of_its_file() -> None:
    from agent_engine.agent.rewrite_answers import shifted
    kept = Suspect("a.py", "f", 10, 12, "def f():\n    x = 1\n    return x")
    later = [Suspect("a.py", "g", 20, 22, "g"), Suspect("b.py", "h", 20, 22, "h"), Suspect("a.py", "e", 2, 4, "e")]
    moved = shifted(later, kept, "def f():\n    return 1")
    assert [(s.first, s.last) for s in moved] == [(19, 21), (20, 22), (2, 4)]


# --------------------------------------------------------------------------- whole files and single changes


def _sandbox(tmp_path: Path, files: dict[str, str]) -> Sandbox:
    for rel, text in files.items():
        (tmp_path / rel).write_text(textwrap.dedent(text))
    sandbox = Sandbox.create(str(tmp_path), timeout=60)
    (Path(sandbox.workdir_path) / "check.py").chmod(0o444)
    return sandbox


def _suspects(sandbox: Sandbox, output: str = "") -> list[dict[str, Any]]:
    op = {"op": "suspects", "argv": ["check.py"], "failing": [], "limit": 4, "output": output}
    return json.loads(run_program(sandbox, op).output)


def test_a_data_file_the_failing_check_opens_is_a_whole_file_suspect(tmp_path: Path) -> None:
    sandbox = _sandbox(tmp_path, {
        "settings.ini": "[app]\nworkers = four\n",
        "app.py": '''\
            import configparser


            def workers(path="settings.ini"):
                cp = configparser.ConfigParser()
                cp.read(path)
                return cp["app"].getint("workers")
            ''',
        "check.py": "import sys\nfrom app import workers\ntry:\n    ok = workers() == 4\nexcept ValueError:\n"
                    "    ok = False\nprint('OK' if ok else 'FAIL workers')\nsys.exit(0 if ok else 1)\n"})
    try:
        found = _suspects(sandbox)
        assert [(d["kind"], d["path"]) for d in found] == [("function", "app.py"), ("file", "settings.ini"),
                                                          ("file", "app.py")]  # the data file before the module
        ini = found[1]
        assert (ini["first"], ini["last"], ini["text"]) == (1, 2, "[app]\nworkers = four")
        done = run_program(sandbox, {"op": "rewrite", "path": "settings.ini", "first": 1, "last": 2,
                                     "old": ini["text"], "new": "[app]\nworkers = 4"})
        assert done.exit_code == 0 and sandbox.run("python3 check.py").exit_code == 0
        assert (Path(sandbox.workdir_path) / "settings.ini").read_text() == "[app]\nworkers = 4\n"  # newline kept
    finally:
        sandbox.close()


@pytest.mark.parametrize("check", [
    "from palindrome import is_palindrome\nassert is_palindrome('a b a')\n",  # the ImportError names the file
    "import sys\ntry:\n    from palindrome import is_palindrome\nexcept ImportError:\n"
    "    sys.exit('FAIL palindrome.is_palindrome does not exist')\n",  # the check's own words name the module
])
def test_a_module_the_failure_names_without_the_function_the_check_imports_is_a_suspect(
        tmp_path: Path, check: str) -> None:
    sandbox = _sandbox(tmp_path, {
        "palindrome.py": 'def normalize(s):\n    return s.replace(" ", "").lower()\n', "check.py": check})
    try:
        out = sandbox.run("python3 check.py")
        assert out.exit_code == 1
        found = _suspects(sandbox, out.output)
        assert [(d["kind"], d["path"]) for d in found] == [("file", "palindrome.py")]  # never check.py
    finally:
        sandbox.close()


def test_a_whole_file_answer_is_its_last_fenced_block_that_parses() -> None:
    from agent_engine.agent.rewrite_answers import rewritten, shown_source
    module = Suspect("p.py", "p.py", 1, 2, "def f(s):\n    return s", kind="file")
    ini = Suspect("s.ini", "s.ini", 1, 2, "[app]\nworkers = four", kind="file")
    assert shown_source(module) == module.text
    assert rewritten(fenced("def f(s):\n    return s\n\n\ndef g(s):\n    return f(s)"), module) == (
        "def f(s):\n    return s\n\n\ndef g(s):\n    return f(s)")
    assert rewritten(fenced("def f(s):\n    return s"), module) is None  # nothing changed
    assert rewritten(fenced("def f(s:\n"), module) is None  # does not parse
    assert rewritten(fenced("def f(s):\n    # the same\n    return s  # code"), module) is None  # comments only
    assert rewritten("Wrong type.\n```ini\n[app]\nworkers = 4\n```", ini) == "[app]\nworkers = 4"


def test_a_rewrite_is_split_into_its_single_changes() -> None:
    from agent_engine.agent.rewrite_answers import single_changes
    old = "def f(a):\n    x = a\n    y = 2\n    return x + y"
    new = "def f(a, b):\n    x = a\n    y = 3\n    return x + y"
    assert single_changes(old, new) == ["def f(a, b):\n    x = a\n    y = 2\n    return x + y",
                                        "def f(a):\n    x = a\n    y = 3\n    return x + y"]
    assert single_changes(old, old.replace("2", "3")) == []  # one change: the rewrite itself was tried


def test_a_crash_turned_into_a_counted_report_improves_the_check() -> None:
    from agent_engine.agent.check_score import CheckScore
    from agent_engine.agent.rewrites import improves
    crash, one, two = CheckScore(False, None, 1), CheckScore(False, 1), CheckScore(False, 2)
    assert improves(one, crash) and improves(one, two) and not improves(two, one)
    assert not improves(crash, one) and not improves(one, CheckScore(False, None))


def test_the_fix_among_breaking_changes_of_an_answer_is_tried_alone_and_solves_the_job() -> None:
    both = fenced('def add(a, b, c):\n    """The sum of a and b."""\n    return a + b')  # the fix, and a break
    server = Rewriter([both])
    result = _run(server, samples=1)
    job = result.results[0].job
    assert (job.solved, job.exit_status, job.attempts) == (True, REWRITE_PASSED, 1)
    assert len(server.chat_bodies()) == 2  # the first suspect's share of two answers, both the same
    transcript = result.results[0].messages
    assert any("tried alone" in m["content"] and "+    return a + b" in m["content"] for m in transcript)


def test_the_issue_s_rare_words_rank_the_function_that_uses_them() -> None:
    from agent_engine.agent.suspect_priors import issue_overlap, words
    assert words("sv.NpmSpec('^0.2.3') rejects next_minor for HTTPServer") >= {"npm", "spec", "next", "minor",
                                                                               "http", "server", "rejects"}
    assert not words("def f(self): return None") & {"def", "self", "return", "none"}
    sources = {("a.py", "caret"): "def caret(v):\n    return v.next_minor()  # npm caret",
               ("a.py", "tilde"): "def tilde(v):\n    return v.next_patch()",
               ("a.py", "parse"): "def parse(text):\n    return text.split('.')"}
    got = issue_overlap("NpmSpec('^0.2.3') is too narrow: the caret range should end at next_minor", sources)
    assert got[("a.py", "caret")] == 1.0 and got[("a.py", "caret")] > got[("a.py", "tilde")] >= got[("a.py", "parse")]
    assert issue_overlap("", sources) == {}


def test_a_dotted_name_names_a_module_file_never_a_package_s_init() -> None:
    from agent_engine.agent.repair_tool import module_files
    assert module_files("pkg.mod.func") == ["pkg/mod/func.py", "pkg/mod.py", "pkg.py"]
    assert module_files("idna.encode") == ["idna/encode.py", "idna.py"]  # not idna/__init__.py
    assert module_files("a/b.py") == [] and module_files("x.1y") == []


def test_a_long_function_is_shown_numbered_and_rewritten_by_the_line_range_an_answer_names() -> None:
    from agent_engine.agent.rewrite_answers import numbered, rewritten, shown_source
    text = "    def f(self, x):\n        y = x + 1\n        if y > 2:\n            return y\n        return 0"
    long = Suspect("m.py", "A.f", 10, 14, text, kind="lines")
    assert shown_source(long) == numbered(long) and numbered(long).split("\n")[2] == "12         if y > 2:"
    got = rewritten("Line 12 compares wrongly.\nLines 12-13:\n```python\nif y >= 2:\n    return y\n```", long)
    assert got == text.replace("if y > 2:", "if y >= 2:")  # indented as the lines it replaces
    assert rewritten("Line 11:\n```python\n        y = x - 1\n```", long) == text.replace("x + 1", "x - 1")
    assert rewritten("Lines 12-13:\n```python\n12         if y >= 2:\n13             return y\n```", long) == (
        text.replace("if y > 2:", "if y >= 2:"))  # the line numbers copied from the numbered source dropped
    assert rewritten("Lines 8-9:\n```python\npass\n```", long) is None  # outside the function
    assert rewritten("```python\nif y >= 2:\n```", long) is None  # no line range
    assert rewritten("Lines 12-13:\n```python\nif y >= 2:\n```", long) is None  # does not parse


def test_a_function_s_code_lines_are_asked_about_one_at_a_time() -> None:
    from agent_engine.agent.rewrite_answers import probe_lines, replaced_line
    text = ('    def f(self, x):\n        """Doc.\n\n        More."""\n        # a note\n        try:\n'
            '            y = g(\n                x)\n        finally:\n            pass\n        return y')
    method = Suspect("m.py", "A.f", 20, 30, text)
    assert probe_lines(method) == [26, 27, 29, 30]  # never the docstring, the comment, `try:` or `finally:`
    assert probe_lines(Suspect("m.py", "m.py", 1, 2, "x = 1\ny = 2", kind="file")) == []
    short = Suspect("m.py", "f", 5, 7, "def f(a):\n    b = a + 1\n    return b")
    assert replaced_line("Off by one.\n```python\nb = a - 1\n```", short, 6) == "def f(a):\n    b = a - 1\n    return b"
    assert replaced_line("```python\nb = a - 1\nb *= 2\n```", short, 6) == (
        "def f(a):\n    b = a - 1\n    b *= 2\n    return b")  # a line missing there
    assert replaced_line("```python\nb = a + 1  # same\n```", short, 6) is None  # comments only
    assert replaced_line("```python\nif b:\n```", short, 6) is None and replaced_line("no block", short, 6) is None
    assert replaced_line("`b = a + 1` is wrong: it should be `b = a - 1`.", short, 6) == (
        "def f(a):\n    b = a - 1\n    return b")  # no block: the last inline span that parses
    assert replaced_line("Here:\n```python\ndef f(a):\n    return a\n```", short, 6) == "def f(a):\n    return a"


def test_a_line_the_model_fixes_once_pointed_at_solves_the_job() -> None:
    fixed = "It subtracts instead of adding.\n```python\nreturn a + b\n```"
    server = Rewriter([WRONG], lines={"return a - b": fixed})
    result = _run(server, samples=1)
    job = result.results[0].job
    assert (job.solved, job.exit_status, job.attempts) == (True, REWRITE_PASSED, 1)
    assert server.line_questions == ["return a - b"]


def test_a_failed_call_among_an_answer_s_samples_costs_only_that_answer() -> None:
    server = Rewriter([WRONG, FAILING, RIGHT])
    result = _run(server)
    job = result.results[0].job
    assert (job.solved, job.exit_status, job.error) == (True, REWRITE_PASSED, None)
    assert any("1 of 2 answers failed" in m["content"] for m in result.results[0].messages)


def test_a_stage_whose_every_call_fails_ends_with_the_error_and_the_agent_goes_on() -> None:
    server = Rewriter([FAILING])
    result = _run(server, samples=1)
    whole = result.results[0]
    assert whole.job.attempts == 2 and whole.job.solved is False  # the stage ended on the error; the agent ran
