"""Repair by function rewrites, judged by the task's check: the stage a job runs before its agent attempts.

Agentless (localize, sample repairs, keep one the tests pass) suits a small model better than a long
tool-calling loop: rewriting one short function it is shown is a completion task it was trained for,
and the check, not the model, judges each try. The stage:

1. runs the task's check in the job's sandbox (nothing to do when it passes);
2. ranks the suspects in the sandbox (``agent_engine.agent.repair_tool.suspects``: the library
   functions the failing tests ran and the passing ones did not, then the static failing path);
   A suspect is a function, or a short file as a whole (a data file the failing tests opened, a module
   the failure names: bugs in a constant, a config file, a function the tests import that is missing);
3. tries the suspects' mutants first (``agent_engine.agent.mutants``: one-token and one-statement edits,
   tier by tier, the likeliest suspect first, at most ``mutants``; the ``MUTANT_SUSPECTS`` first
   suspects, those past ``functions`` a tier later), each written and checked, against
   the failing tests alone first (``agent_engine.agent.mutant_trials``): no model call, no token;
   one that passes ends the stage (``MutantPassed``), the others are undone;
4. for each of the first ``functions`` suspects asks the model for the whole function (or file)
   rewritten (the issue, the failing tests and the check's first failure, the source; a function of
   over 80 lines numbered, rewritten by a line range), the first answer greedy and the rest sampled at
   ``temperature`` with their own seeds, all from one prompt (the engine caches it; the calls carry
   the job's hints, so CONTINUUM pins it); the first suspect gets a double share of the answers;
5. writes each distinct rewrite that parses (and defines that function) and changes more than
   comments in its place (``rewrite`` op: only when the lines still read as shown, never a read-only
   file, the result compiling) and runs the check: passing ends the stage; anything else is undone;
6. for the first ``LINE_ROUND_SUSPECTS`` suspects asks about each line its linter notes point at and
   each code line of a short function alone ("the bug is in this line"), one greedy answer a line, and
   tries each fixed line; for the first suspect, half of
   its answers come from a follow-up that shows the model its best failed try and the check's verdict;
7. then tries alone each single change (a run of replaced, inserted or deleted lines) of the failed
   rewrites that made several: a small model often finds the fix and breaks something beside it. The
   changes most answers made go first, at most ``MAX_SINGLE_CHANGES`` per suspect;
8. once all of a suspect's tries are done, the one that left the fewest failing tests (fewer than
   before, or a crash turned into a report) is written again and kept: the next suspects are
   rewritten on top of it (their line numbers moved).

Invariants:
- Everything runs in the job's sandbox through the tool program or the sandbox's shell; the host
  reads only command output.
- An answer cut at the token limit, without a fenced block, that does not parse, defines no function of
  the suspect's name, or leaves it as it was writes nothing; a prompt the server refuses (too long for
  the context) skips that suspect's round. A call that fails otherwise costs its answer; when every
  call of a round failed so, the stage ends with the first error.
- The stage never says ``is_last_step`` and never releases the job: the agent's attempts follow.
- One ``AgentTurnRecord`` per model call (``command`` = ``rewrite PATH NAME``, ``exit_code`` = the
  check's, ``tool_seconds`` = the write and the check), one ``AgentJobRecord`` (exit status
  ``RewritePassed``, ``MutantPassed`` or ``RewritesFailed``; ``steps`` = model calls, ``mutants`` =
  mutants checked), and the conversation: what the mutants did, each suspect's prompt, then each
  answer and what the check said of it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable
from concurrent.futures import Executor
from dataclasses import dataclass, field

import httpx

from agent_engine.agent.chat import ChatError, ChatReply, stream_chat
from agent_engine.agent.check_score import CheckScore
from agent_engine.agent.failures import read_failures
from agent_engine.agent.job_config import AgentConfig, AgentJobRecord, AgentJobResult, AgentTurnRecord
from agent_engine.agent.loop import client_hints
from agent_engine.agent.mutant_trials import MutantTrials
from agent_engine.agent.rewrite_answers import (
    Suspect,
    asked_lines,
    diff_lines,
    line_text,
    replaced_line,
    rewritten,
    same_code,
    shifted,
    single_changes,
)
from agent_engine.agent.rewrite_prompts import follow_up_message, suspect_prompt
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.stage_sandbox import StageSandbox

__all__ = ["DEFAULT_MUTANTS", "DEFAULT_REWRITE_FUNCTIONS", "DEFAULT_REWRITE_SAMPLES", "MUTANT_PASSED", "REWRITE_PASSED",
           "RewritePolicy", "rewrite_stage"]

DEFAULT_REWRITE_SAMPLES = 4
REWRITE_PASSED, REWRITES_FAILED = "RewritePassed", "RewritesFailed"  # the stage's exit statuses
MUTANT_PASSED = "MutantPassed"  # ... when a mutant passed, before any model call
DEFAULT_MUTANTS = 300  # mutants tried per job, at most
MUTANT_SUSPECTS = 8  # suspects whose mutants are tried (the rewritten ones lead)
KEPT = "Kept"
MAX_SAMPLES_EACH = 3  # times ``samples``: what one suspect may get when fewer than ``functions`` were found
DEFAULT_REWRITE_FUNCTIONS = 4
DEFAULT_REWRITE_TEMPERATURE = 0.8
SEED_BASE = 500  # rewrite seeds start here above the job's seed, apart from the attempts'
TOKENS_PER_LINE = 16  # an answer's budget: this per line of the function, and ANSWER_SLACK
ANSWER_SLACK = 256
MAX_ANSWER_TOKENS = 2048
LINE_RANGE_ANSWER_LINES = 24  # a line-range answer's budget, as for a function this long
FILE_GROWTH_LINES = 16  # a whole-file answer's budget allows this many lines more (a missing function)
LINE_ROUND_SUSPECTS = 2  # the first suspects whose code lines are asked about one at a time
LINE_ANSWER_TOKENS = 192  # a one-line answer's budget (a sentence and the line)
MAX_SINGLE_CHANGES = 8  # single changes tried alone per suspect
OUTPUT_FOR_SUSPECTS_CHARS = 20_000  # of the check's output the sandbox reads for the files it names
SUSPECTS_JSON_CHARS = 1_000_000  # the suspects op's JSON: never cut (a cut list would parse as no suspects)


@dataclass(frozen=True)
class RewritePolicy:
    """How many suspects the stage rewrites, how many answers it samples for each, how many mutants it
    tries first (both 0: no stage)."""

    samples: int = 0
    functions: int = DEFAULT_REWRITE_FUNCTIONS
    mutants: int = 0
    temperature: float = DEFAULT_REWRITE_TEMPERATURE

    def __post_init__(self) -> None:
        if self.samples < 0 or self.functions < 1 or self.mutants < 0:
            raise ValueError(f"rewrite samples and mutants must be >= 0 and functions >= 1, got {self.samples}, "
                             f"{self.mutants}, {self.functions}")
        if self.temperature < 0:
            raise ValueError(f"rewrite temperature must be >= 0, got {self.temperature}")

    @property
    def enabled(self) -> bool:
        return self.samples > 0 or self.mutants > 0

    @property
    def suspects(self) -> int:
        """Suspects ranked: the ``functions`` rewritten, and more whose mutants are tried after the
        rewritten ones' first two tiers."""
        return max(self.functions, MUTANT_SUSPECTS) if self.mutants else self.functions

    def samples_per_suspect(self, found: int) -> list[int]:
        """Answers for each of ``found`` suspects, in rank order: the stage's ``samples x functions``
        answers spread over them, the first suspect (the likeliest) a double share, none more than
        ``MAX_SAMPLES_EACH x samples``, each at least one."""
        if found <= 0 or self.samples <= 0:
            return []
        share = self.samples * self.functions / (found + 1)
        cap = self.samples * MAX_SAMPLES_EACH
        return [min(cap, max(1, math.ceil(2 * share)))] + [min(cap, max(1, round(share)))] * (found - 1)


@dataclass
class _Stage:
    """One job's rewrite stage: its sandbox, records and conversation."""

    client: httpx.AsyncClient
    box: StageSandbox
    config: AgentConfig
    policy: RewritePolicy
    record: AgentJobRecord
    t0: float
    turns: list[AgentTurnRecord]
    messages: list[dict[str, str]]

    async def suspects(self, output: str) -> list[Suspect]:
        failures = read_failures(output)
        op = {"op": "suspects", "argv": self.box.check_args, "failing": failures.tests,
              "tracebacks": [[list(f) for f in tb] for tb in failures.tracebacks], "limit": self.policy.suspects,
              "leading": self.policy.functions, "output": output[-OUTPUT_FOR_SUSPECTS_CHARS:],
              "issue": self.record.task}
        found = await self.box.op_answer(op, SUSPECTS_JSON_CHARS)
        if not isinstance(found, list):
            return []
        return [suspect for d in found if (suspect := Suspect.printed(d)) is not None]

    async def ask(self, messages: list[dict[str, str]], suspect: Suspect, k: int,
                  max_tokens: int | None = None) -> tuple[AgentTurnRecord, ChatReply]:
        """One sampled rewrite of ``suspect`` (the ``k``-th): greedy first, then hotter with a seed; its budget
        fits the suspect unless ``max_tokens`` says otherwise."""
        job = self.record
        sent = time.perf_counter()
        rec = AgentTurnRecord(job.job_id, len(self.turns), sent - self.t0, command=f"rewrite {suspect.path} "
                              f"{suspect.name}")
        rec.temperature = self.config.temperature if k == 0 else max(self.config.temperature, self.policy.temperature)
        rec.seed = None if rec.temperature == 0 else self.config.seed + SEED_BASE + len(self.turns)
        lines = suspect.last - suspect.first + 1 + (FILE_GROWTH_LINES if suspect.whole_file else 0)
        lines = LINE_RANGE_ANSWER_LINES if suspect.by_lines else lines
        rec.max_tokens = max_tokens or min(MAX_ANSWER_TOKENS, TOKENS_PER_LINE * lines + ANSWER_SLACK)
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

    async def try_rewrite(self, rec: AgentTurnRecord, suspect: Suspect, new: str) -> tuple[CheckScore, str] | None:
        """Write ``new`` over ``suspect`` and run the check: its ``(score, output)``; a rewrite that does not
        pass is undone again; None when nothing was written. The write and the check count as ``rec``'s
        tool time (a single change tried alone counts to the answer it came from)."""
        started = time.perf_counter()
        written = await self.box.write(suspect, new)
        now, output = await self.box.run_check() if written else (None, "")
        if now is not None and not now.passed:
            await self.box.undo()
        rec.exit_code = 0 if now is not None and now.passed else 1
        rec.tool_seconds = (rec.tool_seconds or 0.0) + time.perf_counter() - started
        rec.tool_sleep = rec.tool_seconds
        return None if now is None else (now, output)

    async def repair(self) -> bool:
        """The stage's steps (see the module docstring); True when the check passes."""
        started = time.perf_counter()
        baseline, output = await self.box.run_check()
        check_seconds = time.perf_counter() - started
        if baseline.passed:
            return True
        ranked = await self.suspects(output)
        trials = MutantTrials(self.box, self.record, self.messages, self.t0)
        if await trials.passes(ranked, output, check_seconds, self.policy.mutants, leading=self.policy.functions):
            self.record.exit_status = MUTANT_PASSED
            return True
        suspects = ranked[:self.policy.functions]
        per_suspect = self.policy.samples_per_suspect(len(suspects))
        if not per_suspect:
            return False
        for i, (suspect, samples) in enumerate(zip(suspects, per_suspect, strict=True)):
            messages = suspect_prompt(self.record.task, output, suspect, self.box.workdir)
            self.messages += messages
            tries = _Tries(baseline)
            if await self.rounds_pass(i, suspect, samples, messages, output, tries):
                return True
            if await self.try_changes(suspect, tries):
                return True
            if tries.best is not None and await self.box.write(suspect, tries.best[2]):
                self.messages.append({"role": "user", "content": f"{KEPT}: the rewrite that improved the check most "
                                      f"({baseline.describe()} before, {tries.best[0].describe()} with it)."})
                baseline, output = tries.best[0], tries.best[1]
                suspects[i + 1:] = shifted(suspects[i + 1:], suspect, tries.best[2])
        return False

    async def rounds_pass(self, i: int, suspect: Suspect, samples: int, messages: list[dict[str, str]], output: str,
                          tries: _Tries) -> bool:
        """The ``i``-th suspect's rounds: answers from its prompt; for the first ``LINE_ROUND_SUSPECTS``, one
        greedy answer for each code line asked about alone; for the first, a follow-up round. True when a
        rewrite passes the check."""
        plan = rounds(samples, follow_up=i == 0)
        answers = await self.answers(messages, suspect, plan[0])
        if answers is None:
            return False
        if await self.try_answers(suspect, answers, tries):
            return True
        if i < LINE_ROUND_SUSPECTS and await self.try_lines(suspect, output, tries):
            return True
        if len(plan) > 1:
            answers = await self.answers(self.follow_up(messages, tries), suspect, plan[1])
            return answers is not None and await self.try_answers(suspect, answers, tries)
        return False

    async def try_lines(self, suspect: Suspect, output: str, tries: _Tries) -> bool:
        """Ask about each code line of the suspect alone (``asked_lines``: those its linter notes point at,
        then every code line of a short function; the bug is said to be in it, the model writes it fixed),
        all at once, and try each fixed line; True when one passes. A small model that blames the wrong
        line often fixes the right one once it is pointed at."""
        lines = asked_lines(suspect)
        workdir = self.box.workdir
        prompts = [suspect_prompt(self.record.task, output, suspect, workdir, line=n) for n in lines]
        replies = await self.gathered([self.ask(p, suspect, 0, LINE_ANSWER_TOKENS) for p in prompts]) if prompts else []
        for n, answer in zip(lines, replies or [None] * len(lines), strict=True):
            if answer is None:
                continue
            rec, reply = answer
            rec.command += f" line {n}"
            self.messages += [{"role": "user", "content": f"Line {n} alone: `{line_text(suspect, n)}`"},
                              {"role": "assistant", "content": reply.text}]
            new = replaced_line(reply.text, suspect, n) if reply.finish_reason != "length" else None
            if new is None or new in tries.seen:
                self.messages.append({"role": "user", "content": "Not applied: nothing new to write."})
                continue
            tries.seen.add(new)
            if await self.tried(rec, suspect, new, tries):
                return True
        return False

    async def answers(self, messages: list[dict[str, str]], suspect: Suspect,
                      samples: int) -> list[tuple[AgentTurnRecord, ChatReply]] | None:
        """``samples`` answers to ``messages``, sent at once, those that failed left out (see ``gathered``)."""
        got = await self.gathered([self.ask(messages, suspect, k) for k in range(samples)])
        return None if got is None else [answer for answer in got if answer is not None]

    async def gathered(self, calls: list[Awaitable[tuple[AgentTurnRecord, ChatReply]]]
                       ) -> list[tuple[AgentTurnRecord, ChatReply] | None] | None:
        """The answers of model calls sent at once, in their order, None in place of a call that failed: a
        prompt the server refused as too long for the context counts in the job's ``refused``, and one
        call that failed otherwise (a timeout on a loaded server) costs only its answer. None when none
        answered and a refusal was among them; the first error is raised when every call failed otherwise."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        for error in failed:
            if not isinstance(error, httpx.HTTPError | ChatError):
                raise error
        refused = [e for e in failed if isinstance(e, ChatError) and e.context_exceeded]
        self.record.refused += len(refused)
        if failed:
            self.messages.append({"role": "user", "content": f"{len(failed)} of {len(results)} answers failed: "
                                  f"{type(failed[0]).__name__}: {failed[0]}"[:300]})
        if len(failed) < len(results):
            return [None if isinstance(r, BaseException) else r for r in results]
        if refused:
            return None
        raise failed[0]

    def follow_up(self, messages: list[dict[str, str]], tries: _Tries) -> list[dict[str, str]]:
        """The conversation a second round is sampled from (as ChatRepair does): the prompt, the rewrite
        that improved the check most (else the first one tried), what the check said of it, and the
        other changes that failed; the prompt alone when nothing was tried."""
        if not tries.tried:
            return messages
        shown = next((t for t in tries.tried if tries.best is not None and t.new == tries.best[2]), tries.tried[0])
        others = [diff_lines(shown.old, t.new) for t in tries.tried if t is not shown]
        user = follow_up_message(shown.score.describe(), shown.output, self.box.workdir, others)
        follow = [*messages, {"role": "assistant", "content": shown.answer}, {"role": "user", "content": user}]
        self.messages += follow[len(messages):]
        return follow

    async def try_answers(self, suspect: Suspect, answers: list[tuple[AgentTurnRecord, ChatReply]],
                          tries: _Tries) -> bool:
        """Try each distinct rewrite the answers hold; True when one passes the check."""
        for rec, reply in answers:
            self.messages.append({"role": "assistant", "content": reply.text})
            new = rewritten(reply.text, suspect) if reply.finish_reason != "length" else None
            if new is None or new in tries.seen:
                self.messages.append({"role": "user", "content": "Not applied: nothing new to write."})
                continue
            tries.seen.add(new)
            tries.changes += [(rec, part) for part in single_changes(suspect.text, new)
                              if not same_code(part, suspect)]
            if await self.tried(rec, suspect, new, tries, reply.text):
                return True
        return False

    async def try_changes(self, suspect: Suspect, tries: _Tries) -> bool:
        """Try alone each change that a failed rewrite made beside others (the model's fix among edits that
        break it), the changes most answers made first, at most ``MAX_SINGLE_CHANGES``; True when one
        passes."""
        counts: dict[str, int] = {}
        for _, part in tries.changes:
            counts[part] = counts.get(part, 0) + 1
        first_rec = {part: rec for rec, part in reversed(tries.changes)}
        ordered = [p for p in sorted(counts, key=lambda p: -counts[p]) if p not in tries.seen][:MAX_SINGLE_CHANGES]
        for part in ordered:
            tries.seen.add(part)
            self.messages.append({"role": "user", "content": f"One change of the answers, tried alone:\n```\n"
                                  f"{diff_lines(suspect.text, part)}\n```"})
            if await self.tried(first_rec[part], suspect, part, tries):
                return True
        return False

    async def tried(self, rec: AgentTurnRecord, suspect: Suspect, new: str, tries: _Tries, answer: str = "") -> bool:
        """Write ``new``, run the check, say what it did in the conversation, keep it as the best when it
        improves most; True when it passes."""
        tried = await self.try_rewrite(rec, suspect, new)
        if tried is None:
            self.messages.append({"role": "user", "content": "Not applied: the rewrite was refused."})
            return False
        now, now_output = tried
        if now.passed:
            self.messages.append({"role": "user", "content": "The check passes with this rewrite."})
            return True
        self.messages.append({"role": "user", "content": f"Undone: the check still fails ({now.describe()})."})
        if answer:
            tries.tried.append(_Tried(answer, suspect.text, new, now, now_output))
        if improves(now, tries.best[0] if tries.best is not None else tries.baseline):
            tries.best = now, now_output, new
        return False


@dataclass(frozen=True)
class _Tried:
    """One answer's rewrite that was written and failed: the answer, the text it replaced, the rewrite, the
    check's score and output."""

    answer: str
    old: str
    new: str
    score: CheckScore
    output: str


@dataclass
class _Tries:
    """What one suspect's tries have seen: the texts written, the single changes still to try alone, the
    rewrite that improved the check most over ``baseline`` (its score, output, text)."""

    baseline: CheckScore
    seen: set[str] = field(default_factory=set)
    changes: list[tuple[AgentTurnRecord, str]] = field(default_factory=list)
    tried: list[_Tried] = field(default_factory=list)
    best: tuple[CheckScore, str, str] | None = None


def rounds(samples: int, *, follow_up: bool) -> list[int]:
    """A suspect's answers per round: all at once, or (``follow_up``, two or more) half from the prompt and
    the rest from the follow-up that shows what the first half's tries did."""
    return [samples - samples // 2, samples // 2] if follow_up and samples >= 2 else [samples]


def improves(now: CheckScore, before: CheckScore) -> bool:
    """Whether a run fails fewer tests than ``before`` and breaks no more test files, or breaks fewer and
    now counts its failures (a crash that became a report)."""
    if now.failing is None or not before.countable:
        return False
    if now.broken < before.broken:
        return True
    return before.failing is not None and now.failing < before.failing and now.broken <= before.broken


async def rewrite_stage(client: httpx.AsyncClient, task: str, sandbox: Sandbox, job_id: str, config: AgentConfig,
                        policy: RewritePolicy, check: str, *, t0: float,
                        executor: Executor | None = None) -> AgentJobResult:
    """Run the stage in ``sandbox`` (see the module docstring); never raises for a failed model call."""
    record = AgentJobRecord(job_id, job_id, time.perf_counter() - t0, task=task)
    stage = _Stage(client, StageSandbox(sandbox, check, executor), config, policy, record, t0, [], [])
    try:
        passed = await stage.repair()
        record.exit_status = record.exit_status or (REWRITE_PASSED if passed else REWRITES_FAILED)
    except (httpx.HTTPError, ChatError, OSError, ValueError) as e:
        record.error = f"{type(e).__name__}: {e}"
        record.exit_status = type(e).__name__
        if stage.turns:
            stage.turns[-1].error = record.error
    record.close()
    return AgentJobResult(stage.turns, record, stage.messages)
