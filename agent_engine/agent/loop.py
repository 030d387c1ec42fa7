"""One agent job against an OpenAI-compatible chat endpoint, in one of two interfaces.

The conversation is: a system prompt, the task (``TASK_TEMPLATE``), then per step the model's answer
(assistant) and the observation of the action it took. ``interface="text"`` (mini-swe-agent style):
each answer must hold exactly ONE fenced ```bash block, run in the job's ``Sandbox``; zero or several
blocks get a format-error observation instead of a run. ``interface="tools"``: the model calls one of
``agent_engine.agent.aci``'s tools (``tool_choice`` "required", so a grammar-constrained server always
returns a call), the observation is a ``tool`` message; an answer without a call is a format error.
The job ends when a command's first output line is ``SUBMIT_MARKER`` or the ``submit`` tool is called
(exit status "Submitted"; the rest of the output is the submission), when
``step_limit`` model calls were made ("LimitsExceeded"), or on a failed model call (exit status the
error's class name, ``JobRecord.error`` set). One model call is ``agent_engine.agent.chat.stream_chat``.

Invariants:
- ``AgentConfig.hints`` is a style of ``agent_engine.workloads.hint_styles`` and every model call
  carries exactly that style's fields (body and headers), nothing else of the job. ``job_id`` (the
  default): every call carries ``job_id`` and ``is_last_step``, true exactly on the call with index
  ``step_limit - 1`` (the last one the job may make), and the job gets ``DELETE /v1/jobs/{job_id}``
  when it ends, whatever the reason. ``none``: no hint at all and no DELETE (like mini-swe-agent; the
  server infers the job from the prefix chain). A client style carries only its session id.
- One ``AgentTurnRecord`` per model call, in order, then one ``AgentJobRecord``; times are seconds from
  the runner's clock origin ``t0`` (``time.perf_counter`` based), as in
  ``agent_engine.workloads.replay.records``.
- ``tool_seconds`` of a turn is the wall time from the end of the model's answer to the command's
  result (parsing, sandbox, the repository's digest and observation included), i.e. the time the job is
  away from the engine.
- The prompt templates here are the single source of truth: ``tiny_agent_model`` renders its training
  transcripts with the same functions, so the trained model sees exactly what this loop sends.
- Repeats (``agent_engine.agent.repeats``): every call the model makes is recorded in the job's
  ``RepeatGuard`` with the repository's state after it; a call that repeats the previous one or a recent
  failing one on an unchanged repository still runs, its turn record's ``repeat_of`` names the turn it
  repeats, and the next call is sampled at the guard's raised temperature with a seed. In the tool
  interface, a repeat that fails again as its original did leaves no trace in the conversation (its
  answer and observation are dropped, so the next call is sampled hotter from the same prompt and the
  context never fills with copies a small model keeps copying), up to ``MAX_DROPPED_REPEATS`` in a
  row; the next one is kept with the guard's note. Any other repeat's observation carries the note.
- Checked edits (``agent_engine.agent.checked_edits``; tool interface with aids and a task check):
  the task message carries the check's output before the first call; each edit that wrote a file
  runs the check, is undone when it made the check worse (and, up to ``MAX_DROPPED_EDITS`` in a row,
  dropped from the conversation like a failing repeat, the next call sampled at
  ``RESAMPLE_TEMPERATURE`` at least: a search over edits judged by the check), and ends the job
  ("Submitted") when the check passes; a submit while the check fails is refused with the reason a bounded number of times. Each turn record carries the ``temperature`` and ``seed`` its call
  was sent with (seed None: greedy, none sent).
- With ``AgentConfig.context_tokens`` (the runner sets it from the server's ``GET /models``), a prompt
  that would not fit the context is shrunk first (``context_fit``, measured in the server's tokens;
  counted in ``AgentJobRecord.elided``) and each new observation is kept to
  ``ContextFit.observation_chars``. A prompt the server refuses as too long (``ChatError.
  context_exceeded``; counted in ``AgentJobRecord.refused``) never ends the job: it is shrunk further
  and sent again, up to ``len(LEVELS)`` times; without a known context, the refusal's stated length or
  the last prompt the server took sets one.
- An answer cut at the token limit (``finish_reason`` "length") changes nothing: its edit or command is
  refused with the reason (``aci.run_tool_call(cut=True)``; in the text interface, an unclosed block is
  named as cut); counted in ``AgentJobRecord.cut_answers``.
- With ``AgentConfig.aids`` (default: the tools interface only, since ``tiny_agent_model`` is trained on
  the bare text interface), the task message carries the repository map (``aci.repo_map``, computed in
  the sandbox) and a failing command's observation the failing tests and code (``aci.annotate``); the
  text interface's prompt then names the tool commands, which it runs as the tools whatever the prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from agent_engine.agent.aci import (
    CUT_MESSAGE,
    EDIT_TOOLS,
    FAILURE_CHARS,
    SYSTEM_PROMPT_TOOLS_CHECKED,
    TOOLS,
    Progress,
    ToolOutcome,
    annotate,
    focus_words,
    parse_arguments,
    repo_map,
    run_tool_call,
    shell_tool_call,
)
from agent_engine.agent.chat import ChatError, ChatReply, stream_chat
from agent_engine.agent.checked_edits import CheckedEdits, EditResult
from agent_engine.agent.context_fit import LEVELS, ContextFit
from agent_engine.agent.failures import cap_text
from agent_engine.agent.job_config import (
    INTERFACES,
    AgentConfig,
    AgentJobRecord,
    AgentJobResult,
    AgentTurnRecord,
)
from agent_engine.agent.repeats import Repeat, RepeatGuard, call_key, tree_state
from agent_engine.agent.sandbox import CommandResult, Sandbox
from agent_engine.agent.text_interface import (
    CUT_ANSWER_MESSAGE,
    OBSERVATION_TEMPLATE,
    format_error_message,
    initial_messages,
    is_submission,
    parse_actions,
    submission_of,
    tool_name_of,
)
from agent_engine.workloads.hint_styles import hint_fields, releases_jobs
from agent_engine.workloads.sse_client import release_job

__all__ = ["INTERFACES", "AgentConfig", "AgentJobRecord", "AgentJobResult", "AgentTurnRecord", "client_hints",
           "run_agent_job"]

NO_CALL_MESSAGE = ("Format error: call exactly one tool (" + ", ".join(t["function"]["name"] for t in TOOLS[:-1])
                   + " or submit).")
MAX_DROPPED_REPEATS = 2  # repeats of a failing call dropped in a row before one is kept with its note
MAX_DROPPED_EDITS = 3  # edits the check undid dropped in a row before one is kept with its message
RESAMPLE_TEMPERATURE = 0.8  # the least temperature of the call after a dropped one


# --------------------------------------------------------------------------- the job


def client_hints(config: AgentConfig, job_id: str, last: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """``(body fields, headers)`` of the job's hint style for one call; fields without a value are left out
    (the agent does not know the call's tool before the answer)."""
    body, headers = hint_fields(config.hints, job_id, last, None)
    return {k: v for k, v in body.items() if v is not None}, headers


def _request_body(
    config: AgentConfig, messages: list[dict[str, str]], job_id: str, last: bool, temperature: float,
    seed: int | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": messages, "temperature": temperature,
                            **client_hints(config, job_id, last)[0], "stream": config.stream}
    if seed is not None:
        body["seed"] = seed
    if config.stream:
        body["stream_options"] = {"include_usage": True}
    if config.interface == "tools":
        body["tools"], body["tool_choice"] = TOOLS, "required"
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    if config.model is not None:
        body["model"] = config.model
    return body


def _take_reply(rec: AgentTurnRecord, job: AgentJobRecord, reply: ChatReply, sent: float, t0: float) -> float:
    """Fill the turn record (and the job's progress) from a model answer; returns when it arrived."""
    done = time.perf_counter()
    rec.done_at, rec.latency, rec.ttft = done - t0, done - sent, reply.ttft
    rec.prompt_tokens, rec.output_tokens = reply.prompt_tokens, reply.output_tokens
    rec.cached_tokens, rec.finish_reason = reply.cached_tokens, reply.finish_reason
    rec.echoed_job_id = reply.job_id
    rec.set_queue_delay(reply.queue_delay, reply.ttft)
    job.end_at, job.turns, job.steps = rec.done_at, job.turns + 1, job.steps + 1
    return done


@dataclass
class _Job:
    """One running job: its connection, sandbox, conversation and records."""

    client: httpx.AsyncClient
    sandbox: Sandbox
    config: AgentConfig
    record: AgentJobRecord
    messages: list[dict[str, Any]]
    t0: float
    executor: Executor | None
    on_turn: Callable[[AgentTurnRecord], None] | None
    guard: RepeatGuard
    turns: list[AgentTurnRecord] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    fit: ContextFit | None = None
    final: bool = True  # the job's last attempt: its last call says so, and the job is released after it
    checked: CheckedEdits | None = None  # the task's check after each edit (agent_engine.agent.checked_edits)
    rejected: int = 0  # calls just dropped from the conversation, in a row
    resample: bool = False  # the last call was an undone edit, dropped: sample the next one hotter
    last_repeat: Repeat | None = None  # what the last call repeated (None: a new call)

    async def step(self, step: int) -> bool:
        """One model call and the command it issued; returns True when the job is over. Records the
        branch point: the conversation's length before the first call that changed the repository."""
        n_before, state_before = len(self.messages), self.guard.state
        over = await self._step(step)
        if self.record.branch_at is None and self.guard.state != state_before:
            self.record.branch_at = n_before
        return over

    async def _step(self, step: int) -> bool:
        job, last = self.record, self.final and step == self.config.step_limit - 1
        sent = time.perf_counter()
        rec = AgentTurnRecord(job.job_id, step, sent - self.t0, is_last_step=last,
                              max_tokens=self.config.max_tokens or 0)
        rec.temperature, rec.seed = self._sampling(step)
        self.turns.append(rec)
        if job.start_at is None:
            job.start_at = rec.sent_at
        try:
            reply = await self._ask(last, rec, sent)
        except Exception as e:  # a failed call ends the job, and is recorded
            rec.error = job.error = f"{type(e).__name__}: {e}"
            job.exit_status = type(e).__name__
            return True
        done = _take_reply(rec, job, reply, sent, self.t0)
        self.record.cut_answers += reply.finish_reason == "length"
        if self.config.interface == "tools":
            submitted = await self._call_tool(rec, reply)
        else:
            self.messages.append({"role": "assistant", "content": reply.text})
            submitted = await self._act(rec, parse_actions(reply.text), reply.text, reply.finish_reason == "length")
        rec.tool_seconds = rec.tool_sleep = time.perf_counter() - done
        if self.on_turn is not None:
            self.on_turn(rec)
        return submitted

    async def _ask(self, last: bool, rec: AgentTurnRecord, sent: float) -> ChatReply:
        """The model's answer to the conversation, fitted to the context first; a prompt the server still
        finds too long is shrunk further and sent again (see the module docstring)."""
        job = self.record
        headers = client_hints(self.config, job.job_id, last)[1]
        for attempt in range(len(LEVELS)):
            if self.fit is not None:
                job.elided += self.fit.fit(self.messages, attempt)
            body = _request_body(self.config, self.messages, job.job_id, last, rec.temperature, rec.seed)
            try:
                reply = await stream_chat(self.client, body, sent, headers)
            except ChatError as e:
                if not e.context_exceeded or attempt == len(LEVELS) - 1:
                    raise
                if self.fit is None:
                    self.fit = self.config.context_fit(e.context_tokens or self._context_seen())
                    if self.fit is None:
                        raise
                job.refused += 1
                self.fit.refused(self.messages)
                continue
            if self.fit is not None:
                self.fit.observe(self.messages, reply.prompt_tokens)
            return reply
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _context_seen(self) -> int | None:
        """A context the server surely has: the largest prompt and answer it took in this job."""
        seen = [t.prompt_tokens + t.output_tokens for t in self.turns if t.error is None and t.prompt_tokens]
        return max(seen) if seen else None

    def _observation(self, text: str) -> str:
        """``text`` kept to the share of the context one observation may take (and the failing code)."""
        return text if self.fit is None else cap_text(text, self.fit.observation_chars() + FAILURE_CHARS + 400)

    async def _act(self, rec: AgentTurnRecord, actions: list[str], answer: str, cut: bool = False) -> bool:
        """Run the answer's one command (or report a format error); returns True on a submission. A
        command that spells a tool (``view_file PATH 10 40``) runs that tool."""
        rec.n_actions = len(actions)
        if len(actions) != 1:
            self.record.format_errors += 1
            message = format_error_message(len(actions))
            if cut and not actions:
                message = {**message, "content": CUT_ANSWER_MESSAGE}
            note = self._repeat_note(rec, call_key(None, answer), True, None, message["content"], self.guard.state)
            self.messages.append({**message, "content": _with_note(message["content"], note)})
            return False
        command = actions[0]
        rec.command, rec.tool_name = command, tool_name_of(command)
        call = shell_tool_call(command)
        if call is not None and call["function"]["name"] != "submit":
            outcome, state = await self._in_sandbox(run_tool_call, self.sandbox, call)
            result = CommandResult(1 if outcome.format_error else outcome.exit_code or 0, outcome.observation, 0.0,
                                   outcome.timed_out)
            rec.tool_name = outcome.tool_name or rec.tool_name
        else:
            result, state = await self._in_sandbox(self.sandbox.run, command)
        rec.exit_code, rec.timed_out = result.exit_code, result.timed_out
        rec.submitted = is_submission(command, result.output)
        if rec.submitted:
            self.record.exit_status, self.record.submission = "Submitted", submission_of(result.output)
            return True
        limit = self.fit.observation_chars() if self.fit is not None else None
        output = result.output if limit is None else cap_text(result.output, limit)
        if call is None and result.exit_code != 0 and self.config.uses_aids:
            output = (await self._in_sandbox(annotate, self.sandbox, result.output, limit))[0].text + "\n"
        content = OBSERVATION_TEMPLATE.format(exit_code=result.exit_code, output=self._observation(output))
        note = self._repeat_note(rec, call_key("bash", command), result.exit_code != 0, result.exit_code,
                                 result.output, state)
        self.messages.append({"role": "user", "content": _with_note(content, note)})
        return False

    async def _in_sandbox(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, str]:
        """``fn(*args)`` on the executor, and the repository's ``tree_state`` right after it."""
        def run() -> tuple[Any, str]:
            return fn(*args), tree_state(self.sandbox.workdir_fd)

        return await asyncio.get_running_loop().run_in_executor(self.executor, run)

    def _repeat_note(self, rec: AgentTurnRecord, key: str, failed: bool, exit_code: int | None, output: str,
                     state_after: str) -> str:
        """Record the call in the guard; the note its observation carries ("" for a new call)."""
        repeat: Repeat | None = self.guard.record(key, failed, exit_code, output, state_after)
        self.last_repeat = repeat
        if repeat is None:
            return ""
        rec.repeat_of = rec.turn - repeat.calls_ago
        self.record.repeats += 1
        return repeat.note()

    async def _call_tool(self, rec: AgentTurnRecord, reply: ChatReply) -> bool:
        """Run the answer's first tool call (or report that it made none); returns True on submit."""
        calls = reply.tool_calls[:1]
        self.messages.append({"role": "assistant", "content": reply.text or None, "tool_calls": calls}
                             if calls else {"role": "assistant", "content": reply.text})
        rec.n_actions = len(reply.tool_calls)
        if not calls:
            self.record.format_errors += 1
            message = CUT_MESSAGE if reply.finish_reason == "length" else NO_CALL_MESSAGE
            note = self._repeat_note(rec, call_key(None, reply.text), True, None, message, self.guard.state)
            self.messages.append({"role": "user", "content": _with_note(message, note)})
            return False
        call = {**calls[0], "id": calls[0].get("id") or f"call_{rec.turn}"}
        run = partial(run_tool_call, cut=reply.finish_reason == "length", failure_code=self.config.uses_aids,
                      output_chars=self._output_chars())
        checked, state = await self._in_sandbox(self._checked_call, run, call)
        outcome, passed = checked.outcome, checked.passed
        self.record.format_errors += outcome.format_error
        rec.command, rec.exit_code, rec.timed_out = outcome.command or None, outcome.exit_code, outcome.timed_out
        rec.tool_name = tool_name_of(outcome.command) if outcome.tool_name == "bash" else outcome.tool_name or None
        rec.submitted = outcome.submitted or passed
        if rec.submitted:
            self.record.exit_status, self.record.submission = "Submitted", ""
            if passed:  # the edit made the task's check pass: the model sees it, and the job is done
                self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": outcome.observation})
            return True
        function = call.get("function") or {}
        raw = function.get("arguments")
        args = parse_arguments(raw)
        failed = outcome.format_error or outcome.timed_out or outcome.exit_code != 0
        note = self._repeat_note(rec, call_key(function.get("name"), raw if args is None else args), failed,
                                 outcome.exit_code, outcome.observation, state)
        if self._drop(failed, checked.undone):
            self.messages.pop()  # the call leaves no trace the model could copy again
            return False
        advice = "" if self.checked is not None and outcome.tool_name in EDIT_TOOLS else \
            self.progress.advice(outcome, repeated=bool(note))
        observation = _with_note(_with_note(self._observation(outcome.observation), note), advice)
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
        return False

    def _output_chars(self) -> int | None:
        return self.fit.observation_chars() if self.fit is not None else None

    def _checked_call(self, run: Callable[..., ToolOutcome], call: dict[str, Any]) -> EditResult:
        """Run one tool call in the sandbox; with the task's check known, an edit is checked (kept or
        undone: ``EditResult``) and a run of the check moves the baseline."""
        outcome: ToolOutcome = run(self.sandbox, call)
        if self.checked is None or outcome.format_error:
            return EditResult(outcome)
        if outcome.submitted:
            return EditResult(self.checked.refuse_submit(outcome) or outcome)
        if outcome.tool_name in EDIT_TOOLS and outcome.exit_code == 0:
            return self.checked.after_edit(self.sandbox, outcome, self._output_chars())
        if outcome.tool_name == "bash" and self.checked.is_check(outcome.command):
            self.checked.saw_run(outcome.exit_code, outcome.observation)
        return EditResult(outcome)

    def _drop(self, failed: bool, undone: bool) -> bool:
        """Whether the call just made is dropped from the conversation, so the next call is sampled
        hotter from the same prompt: an edit the check undid (up to ``MAX_DROPPED_EDITS`` in a row: a
        search over edits, judged by the check) or a repeat failing again as the call it repeats failed
        (up to ``MAX_DROPPED_REPEATS``); past those, the call is kept with what it got, so the model
        hears why."""
        repeat = self.last_repeat
        repeated = failed and repeat is not None and repeat.failed
        limit = MAX_DROPPED_EDITS if undone else MAX_DROPPED_REPEATS
        if not (undone or repeated) or self.rejected >= limit:
            self.rejected, self.resample = 0, False
            return False
        self.rejected, self.resample = self.rejected + 1, undone
        return True

    def _sampling(self, step: int) -> tuple[float, int | None]:
        """The call's temperature and seed: the repeat guard's, at least ``RESAMPLE_TEMPERATURE`` (seeded)
        right after a dropped edit."""
        temperature, seed = self.guard.sampling(step)
        if self.resample and temperature < RESAMPLE_TEMPERATURE:
            return RESAMPLE_TEMPERATURE, self.guard.seed + step
        return temperature, seed


def _with_note(text: str, note: str) -> str:
    """``text`` with ``note`` after a blank line (``text`` itself when there is no note)."""
    return f"{text}\n\n{note}" if note else text


async def run_agent_job(client: httpx.AsyncClient, task: str, sandbox: Sandbox, job_id: str,
                        config: AgentConfig, *, t0: float, executor: Executor | None = None,
                        on_turn: Callable[[AgentTurnRecord], None] | None = None,
                        check: str | None = None, prefix: list[dict[str, Any]] | None = None,
                        final: bool = True) -> AgentJobResult:
    """Run one job to its end (see the module docstring); commands run on ``executor`` threads.
    ``check`` is the task's check command, which the tool interface's advice names.

    ``prefix``: the conversation to continue (an attempt branching from an earlier one's reads,
    ``agent_engine.agent.attempts``; ``sandbox`` must hold the repository as that conversation left it);
    its answers count as steps taken. ``final=False``: not the job's last attempt, so no call says
    ``is_last_step`` and the job is not released (the server keeps what the next attempt reuses)."""
    record = AgentJobRecord(job_id, job_id, time.perf_counter() - t0, task=task)
    loop = asyncio.get_running_loop()
    fit = config.context_fit()
    checked = CheckedEdits(check) if check and config.uses_aids and config.interface == "tools" else None
    if prefix is not None:
        messages = [dict(m) for m in prefix]
        if checked is not None:  # the branch's repository is the opening's: its check run is the baseline
            result = await loop.run_in_executor(executor, sandbox.run, check)
            checked.saw_run(result.exit_code, result.output)
    else:
        the_map = await loop.run_in_executor(executor, repo_map, sandbox, config.map_chars, focus_words(task)) \
            if config.uses_aids and config.map_chars > 0 else None
        prompt = SYSTEM_PROMPT_TOOLS_CHECKED if checked is not None and config.system_prompt is None else config.prompt
        messages = list(initial_messages(task, prompt, the_map))
        if checked is not None:
            chars = fit.observation_chars() if fit is not None else None
            opening = await loop.run_in_executor(executor, checked.opening, sandbox, chars)
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n\n" + opening}
    state = await loop.run_in_executor(executor, tree_state, sandbox.workdir_fd)
    guard = RepeatGuard(config.temperature, config.seed, config.escalation(), state)
    job = _Job(client, sandbox, config, record, messages, t0, executor, on_turn, guard, progress=Progress(check),
               fit=fit, final=final, checked=checked)
    taken = sum(1 for m in messages if m.get("role") == "assistant")
    try:
        for step in range(taken, config.step_limit):
            if await job.step(step):
                break
        else:
            record.exit_status, record.truncated = "LimitsExceeded", True
    finally:
        if final and releases_jobs(config.hints):
            await release_job(client, job_id)
    record.close()
    return AgentJobResult(job.turns, record, job.messages)
