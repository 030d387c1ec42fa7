"""Repair by function rewrites, judged by the task's check: the stage a job runs before its agent attempts.

Agentless (localize, sample repairs, keep one the tests pass) suits a small model better than a long
tool-calling loop: rewriting one short function it is shown is a completion task it was trained for,
and the check, not the model, judges each try. The stage:

1. runs the task's check in the job's sandbox (nothing to do when it passes);
2. ranks the suspects in the sandbox (``agent_engine.agent.repair_tool.suspects``: the library
   functions the failing tests ran and the passing ones did not, then the static failing path);
3. for each of the first ``functions`` suspects asks the model ``samples`` times for the whole
   function rewritten (the issue, the failing tests and the check's first failure, the function's
   source), the first answer greedy and the rest sampled at ``temperature`` with their own seeds,
   all from one prompt (the engine caches it; the calls carry the job's hints, so CONTINUUM pins it);
4. writes each distinct rewrite that parses and defines that function in place of the function
   (``rewrite`` op: only when the lines still read as shown, never a read-only file, the result
   compiling) and runs the check: passing ends the stage; anything else is undone. Once all of a
   suspect's answers are tried, the one that left the fewest failing tests (fewer than before) is
   written again and kept: the next suspects are rewritten on top of it (their line numbers moved).

Invariants:
- Everything runs in the job's sandbox through the tool program or the sandbox's shell; the host
  reads only command output.
- An answer cut at the token limit, without a fenced block, that does not parse, defines no function of
  the suspect's name, or leaves it as it was writes nothing; a prompt the server refuses (too long for
  the context) skips that suspect. A model call that fails otherwise ends the stage with its error.
- The stage never says ``is_last_step`` and never releases the job: the agent's attempts follow.
- One ``AgentTurnRecord`` per model call (``command`` = ``rewrite PATH NAME``, ``exit_code`` = the
  check's, ``tool_seconds`` = the write and the check), one ``AgentJobRecord`` (exit status
  ``RewritePassed`` or ``RewritesFailed``; ``steps`` = model calls), and the conversation: each
  suspect's prompt, then each answer and what the check said of it.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import shlex
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import TypeVar

import httpx

from agent_engine.agent.aci import run_program
from agent_engine.agent.chat import ChatError, ChatReply, stream_chat
from agent_engine.agent.check_score import CheckScore, score
from agent_engine.agent.failures import cap_text, failures_line, read_failures, summarize_unittest
from agent_engine.agent.job_config import AgentConfig, AgentJobRecord, AgentJobResult, AgentTurnRecord
from agent_engine.agent.loop import client_hints
from agent_engine.agent.sandbox import Sandbox

__all__ = ["DEFAULT_REWRITE_SAMPLES", "REWRITE_PASSED", "RewritePolicy", "python_check_args", "rewrite_stage", "rewritten_function"]

DEFAULT_REWRITE_SAMPLES = 4
REWRITE_PASSED, REWRITES_FAILED = "RewritePassed", "RewritesFailed"  # the stage's exit statuses
KEPT = "Kept"
MAX_SAMPLES_EACH = 3  # times ``samples``: what one suspect may get when fewer than ``functions`` were found
_PROGRESS = re.compile(r"^[.sFExu]{8,}$", re.M)  # unittest's progress dots
DEFAULT_REWRITE_FUNCTIONS = 4
DEFAULT_REWRITE_TEMPERATURE = 0.8
SEED_BASE = 500  # rewrite seeds start here above the job's seed, apart from the attempts'
CHECK_OUTPUT_CHARS = 1500  # of the check's output in a rewrite prompt
TOKENS_PER_LINE = 16  # an answer's budget: this per line of the function, and ANSWER_SLACK
ANSWER_SLACK = 256
MAX_ANSWER_TOKENS = 2048
SYSTEM = "You are an expert Python developer. You fix bugs with the smallest change that makes the tests pass."
_PYTHON = re.compile(r"^python(?:3(?:\.[0-9]+)?)?$")
_BLOCK = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.S)
T = TypeVar("T")


@dataclass(frozen=True)
class RewritePolicy:
    """How many suspects the stage rewrites and how many answers it samples for each (0: no stage)."""

    samples: int = 0
    functions: int = DEFAULT_REWRITE_FUNCTIONS
    temperature: float = DEFAULT_REWRITE_TEMPERATURE

    def __post_init__(self) -> None:
        if self.samples < 0 or self.functions < 1:
            raise ValueError(f"rewrite samples must be >= 0 and functions >= 1, got {self.samples}, {self.functions}")
        if self.temperature < 0:
            raise ValueError(f"rewrite temperature must be >= 0, got {self.temperature}")

    @property
    def enabled(self) -> bool:
        return self.samples > 0

    def samples_each(self, found: int) -> int:
        """Answers per suspect when ``found`` suspects were found: the stage's ``samples x functions``
        answers spread over them, at most ``MAX_SAMPLES_EACH x samples`` each."""
        if found <= 0:
            return 0
        return min(self.samples * MAX_SAMPLES_EACH, -(-self.samples * self.functions // found))


@dataclass(frozen=True)
class Suspect:
    """A function to rewrite, as the sandbox read it."""

    path: str
    name: str
    first: int
    last: int
    text: str


def python_check_args(check: str) -> list[str]:
    """The arguments after the interpreter of a ``python3 ...`` check command; [] for any other command
    (its spectrum cannot be taken: the static failing path alone ranks the suspects)."""
    try:
        argv = shlex.split(check)
    except ValueError:
        return []
    return argv[1:] if argv and _PYTHON.match(argv[0].rsplit("/", 1)[-1]) else []


def rewritten_function(answer: str, suspect: Suspect) -> str | None:
    """The function an answer rewrites, with the suspect's own docstring (the model is shown none) and
    indented as the suspect is; None when the answer holds no fenced block that parses and defines a
    function of the suspect's name, or rewrites nothing."""
    short = suspect.name.split(".")[-1]
    for block in _BLOCK.findall(answer):
        code = textwrap.dedent(block).strip("\n")
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        node = _defined(tree, short)
        if node is None:
            continue
        lines = code.split("\n")
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body = textwrap.dedent("\n".join(lines[first - 1:node.end_lineno or node.lineno]))
        head, _, rest = _docstring_split(body)
        original = _docstring_split(textwrap.dedent(suspect.text))
        docstring = _reindented(original[1], _indent_of(original[2]), _indent_of(rest))
        indent = suspect.text[:len(suspect.text) - len(suspect.text.lstrip())].split("\n")[-1]
        new = "\n".join(indent + x if x.strip() else "" for x in head + docstring + rest)
        return None if _same(new, suspect.text) else new
    return None


def shown_source(suspect: Suspect) -> str:
    """The suspect as the model is shown it: dedented, without its docstring (fewer tokens, and no
    backticks of its own to end the answer's fenced block early; ``rewritten_function`` puts it back)."""
    head, _, rest = _docstring_split(textwrap.dedent(suspect.text))
    return "\n".join(head + rest)


def _docstring_split(code: str) -> tuple[list[str], list[str], list[str]]:
    """A dedented function's lines as (up to its body, its docstring, the rest of its body); the whole
    function as the first part when it does not parse or its body shares the ``def`` line."""
    lines = code.split("\n")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return lines, [], []
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if node is None or not node.body or node.body[0].lineno == node.lineno:
        return lines, [], []
    start = node.body[0].lineno - 1
    doc = node.body[0]
    if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
        end = doc.end_lineno or doc.lineno
        return lines[:start], lines[start:end], lines[end:]
    return lines[:start], [], lines[start:]


def _indent_of(lines: list[str]) -> str:
    return next((x[:len(x) - len(x.lstrip())] for x in lines if x.strip()), "")


def _reindented(lines: list[str], was: str, now: str) -> list[str]:
    """``lines`` moved from the indentation ``was`` to ``now`` (as they were when not indented by ``was``)."""
    if was == now:
        return lines
    return [now + x[len(was):] if x.startswith(was) else x for x in lines]


def _defined(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function ``name`` at the top of ``tree`` or as a method of its one class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for cls in classes[:1]:
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return node
    return None


def _same(a: str, b: str) -> bool:
    """Whether two sources are the same code (blank lines and trailing blanks aside)."""
    def norm(t: str) -> list[str]:
        return [x.rstrip() for x in t.split("\n") if x.strip()]
    return norm(a) == norm(b)


def _prompt(task: str, output: str, suspect: Suspect, workdir: str) -> list[dict[str, str]]:
    """The one prompt all of a suspect's rewrites are sampled from: the issue, the check's failure (its
    progress dots left out, paths relative to the repository), the function."""
    failing = failures_line(read_failures(output))
    output = _PROGRESS.sub("", output).replace(workdir.rstrip("/") + "/", "")
    shown = cap_text(summarize_unittest(output, keep=1), CHECK_OUTPUT_CHARS).strip()
    source = shown_source(suspect)
    user = (f"A user reported this issue:\n{task.strip()}\n\nThe project's tests fail. {failing}\n{shown}\n\n"
            f"This function ({suspect.name}, lines {suspect.first}-{suspect.last} of {suspect.path}) runs in the "
            f"failing tests (its docstring left out):\n```python\n{source}\n```\n\n"
            "If the bug is in this function, say in one sentence which line is wrong and why, then give the whole "
            "function with the bug fixed, changing as little as possible, in one ```python block.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass
class _Stage:
    """One job's rewrite stage: its sandbox, records and conversation."""

    client: httpx.AsyncClient
    sandbox: Sandbox
    config: AgentConfig
    policy: RewritePolicy
    check: str
    record: AgentJobRecord
    t0: float
    executor: Executor | None
    turns: list[AgentTurnRecord]
    messages: list[dict[str, str]]

    async def in_sandbox(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def run_check(self) -> tuple[CheckScore, str]:
        result = await self.in_sandbox(self.sandbox.run, self.check)
        return score(result.exit_code, result.output), result.output

    async def suspects(self, output: str) -> list[Suspect]:
        failures = read_failures(output)
        op = {"op": "suspects", "argv": python_check_args(self.check), "failing": failures.tests,
              "tracebacks": [[list(f) for f in tb] for tb in failures.tracebacks], "limit": self.policy.functions}
        result = await self.in_sandbox(run_program, self.sandbox, op)
        try:
            found = json.loads(result.output.strip().splitlines()[-1]) if result.output.strip() else []
        except (ValueError, IndexError):
            return []
        return [Suspect(str(d["path"]), str(d["name"]), int(d["first"]), int(d["last"]), str(d["text"]))
                for d in found if isinstance(d, dict) and {"path", "name", "first", "last", "text"} <= d.keys()]

    async def ask(self, messages: list[dict[str, str]], suspect: Suspect, k: int) -> tuple[AgentTurnRecord, ChatReply]:
        """One sampled rewrite of ``suspect`` (the ``k``-th): greedy first, then hotter with a seed."""
        job = self.record
        sent = time.perf_counter()
        rec = AgentTurnRecord(job.job_id, len(self.turns), sent - self.t0, command=f"rewrite {suspect.path} "
                              f"{suspect.name}")
        rec.temperature = self.config.temperature if k == 0 else max(self.config.temperature, self.policy.temperature)
        rec.seed = None if rec.temperature == 0 else self.config.seed + SEED_BASE + len(self.turns)
        lines = suspect.last - suspect.first + 1
        rec.max_tokens = min(MAX_ANSWER_TOKENS, TOKENS_PER_LINE * lines + ANSWER_SLACK)
        self.turns.append(rec)
        if job.start_at is None:
            job.start_at = rec.sent_at
        hint_body, hint_headers = client_hints(self.config, job.job_id, False)
        body: dict[str, object] = {"messages": messages, "temperature": rec.temperature, "max_tokens": rec.max_tokens,
                                   "stream": False, **hint_body}
        if rec.seed is not None:
            body["seed"] = rec.seed
        if self.config.model is not None:
            body["model"] = self.config.model
        reply = await stream_chat(self.client, body, sent, hint_headers)
        done = time.perf_counter()
        rec.done_at, rec.latency = done - self.t0, done - sent
        rec.prompt_tokens, rec.output_tokens, rec.cached_tokens = (reply.prompt_tokens, reply.output_tokens,
                                                                   reply.cached_tokens)
        rec.finish_reason, rec.echoed_job_id = reply.finish_reason, reply.job_id
        job.end_at, job.turns, job.steps = rec.done_at, job.turns + 1, job.steps + 1
        return rec, reply

    async def write(self, suspect: Suspect, new: str) -> bool:
        """Write ``new`` over ``suspect`` (the ``rewrite`` op); False when it was refused."""
        op = {"op": "rewrite", "path": suspect.path, "first": suspect.first, "last": suspect.last,
              "old": suspect.text, "new": new}
        return (await self.in_sandbox(run_program, self.sandbox, op)).exit_code == 0

    async def try_rewrite(self, rec: AgentTurnRecord, suspect: Suspect, new: str) -> tuple[CheckScore, str] | None:
        """Write ``new`` over ``suspect`` and run the check: its ``(score, output)``; a rewrite that does not
        pass is undone again; None when nothing was written."""
        started = time.perf_counter()
        if not await self.write(suspect, new):
            rec.exit_code, rec.tool_seconds = 1, time.perf_counter() - started
            return None
        now, output = await self.run_check()
        rec.exit_code = 0 if now.passed else 1
        if not now.passed:
            await self.in_sandbox(run_program, self.sandbox, {"op": "undo"})
        rec.tool_seconds = rec.tool_sleep = time.perf_counter() - started
        return now, output

    async def repair(self) -> bool:
        """The stage's steps (see the module docstring); True when the check passes."""
        baseline, output = await self.run_check()
        if baseline.passed:
            return True
        suspects = (await self.suspects(output))[:self.policy.functions]
        samples = self.policy.samples_each(len(suspects))
        for i, suspect in enumerate(suspects):
            messages = _prompt(self.record.task, output, suspect, str(self.sandbox.workdir))
            self.messages += messages
            try:
                answers = await asyncio.gather(*(self.ask(messages, suspect, k) for k in range(samples)))
            except ChatError as e:
                if not e.context_exceeded:
                    raise
                self.record.refused += 1
                continue
            seen: set[str] = set()
            best: tuple[CheckScore, str, str] | None = None  # the rewrite that improved the check most
            for rec, reply in answers:
                self.messages.append({"role": "assistant", "content": reply.text})
                new = rewritten_function(reply.text, suspect) if reply.finish_reason != "length" else None
                if new is None or new in seen:
                    self.messages.append({"role": "user", "content": "Not applied: no new whole function."})
                    continue
                seen.add(new)
                tried = await self.try_rewrite(rec, suspect, new)
                if tried is None:
                    self.messages.append({"role": "user", "content": "Not applied: the rewrite was refused."})
                    continue
                now, now_output = tried
                if now.passed:
                    self.messages.append({"role": "user", "content": "The check passes with this rewrite."})
                    return True
                self.messages.append({"role": "user", "content": f"Undone: the check still fails ({now.describe()})."})
                if improves(now, best[0] if best is not None else baseline):
                    best = now, now_output, new
            if best is not None and await self.write(suspect, best[2]):
                self.messages.append({"role": "user", "content": f"{KEPT}: the rewrite that improved the check most "
                                      f"({baseline.describe()} before, {best[0].describe()} with it)."})
                baseline, output = best[0], best[1]
                suspects[i + 1:] = shifted(suspects[i + 1:], suspect, best[2])
        return False


def improves(now: CheckScore, before: CheckScore) -> bool:
    """Whether a run fails fewer tests than ``before`` and breaks no more test files."""
    return (before.countable and now.failing is not None and before.failing is not None
            and now.failing < before.failing and now.broken <= before.broken)


def shifted(later: list[Suspect], kept: Suspect, new: str) -> list[Suspect]:
    """``later`` suspects with their line numbers moved by a rewrite of ``kept`` kept above them."""
    delta = len(new.split("\n")) - (kept.last - kept.first + 1)
    return [replace(s, first=s.first + delta, last=s.last + delta) if s.path == kept.path and s.first > kept.last
            else s for s in later]


async def rewrite_stage(client: httpx.AsyncClient, task: str, sandbox: Sandbox, job_id: str, config: AgentConfig,
                        policy: RewritePolicy, check: str, *, t0: float,
                        executor: Executor | None = None) -> AgentJobResult:
    """Run the stage in ``sandbox`` (see the module docstring); never raises for a failed model call."""
    record = AgentJobRecord(job_id, job_id, time.perf_counter() - t0, task=task)
    stage = _Stage(client, sandbox, config, policy, check, record, t0, executor, [], [])
    try:
        passed = await stage.repair()
        record.exit_status = REWRITE_PASSED if passed else REWRITES_FAILED
    except (httpx.HTTPError, ChatError, OSError, ValueError) as e:
        record.error = f"{type(e).__name__}: {e}"
        record.exit_status = type(e).__name__
        if stage.turns:
            stage.turns[-1].error = record.error
    record.close()
    return AgentJobResult(stage.turns, record, stage.messages)
