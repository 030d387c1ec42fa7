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
  failing one on an unchanged repository still runs, its observation carries the guard's note, its
  turn record's ``repeat_of`` names the turn it repeats, and the next call is sampled at the guard's
  raised temperature with a seed. Each turn record carries the ``temperature`` and ``seed`` its call
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
import json
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from agent_engine.agent.aci import (
    CUT_MESSAGE,
    FAILURE_CHARS,
    MAP_CHARS,
    SYSTEM_PROMPT_TOOLS,
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
from agent_engine.agent.context_fit import LEVELS, MARGIN_TOKENS, ContextFit
from agent_engine.agent.failures import cap_text
from agent_engine.agent.repeats import Escalation, Repeat, RepeatGuard, call_key, tree_state
from agent_engine.agent.sandbox import CommandResult, Sandbox
from agent_engine.agent.text_interface import (
    CUT_ANSWER_MESSAGE,
    OBSERVATION_TEMPLATE,
    SYSTEM_PROMPT,
    TOOL_COMMANDS,
    format_error_message,
    initial_messages,
    is_submission,
    parse_actions,
    submission_of,
    tool_name_of,
)
from agent_engine.workloads.hint_styles import HINT_STYLES, hint_fields, releases_jobs
from agent_engine.workloads.replay.records import JobRecord, TurnRecord
from agent_engine.workloads.sse_client import release_job

__all__ = ["INTERFACES", "AgentConfig", "AgentJobRecord", "AgentJobResult", "AgentTurnRecord", "client_hints",
           "run_agent_job"]

NO_CALL_MESSAGE = ("Format error: call exactly one tool (" + ", ".join(t["function"]["name"] for t in TOOLS[:-1])
                   + " or submit).")
INTERFACES = ("text", "tools")


@dataclass(frozen=True)
class AgentConfig:
    """Knobs of one agent job; ``max_tokens=None`` lets the server fill up to the context;
    ``system_prompt=None`` is the interface's own. ``temperature`` is the base temperature; after a
    repeated call the next one is sampled at ``repeat_temperature_step`` more per consecutive repeat, up
    to ``repeat_temperature_cap`` (``agent_engine.agent.repeats.Escalation``; a step of 0 keeps the base),
    with the seed ``seed + step``."""

    step_limit: int = 30
    max_tokens: int | None = None
    temperature: float = 0.0
    seed: int = 0
    repeat_temperature_step: float = Escalation.step
    repeat_temperature_cap: float = Escalation.cap
    model: str | None = None
    system_prompt: str | None = None
    stream: bool = True
    hints: str = "job_id"  # a style of agent_engine.workloads.hint_styles
    interface: str = "text"  # one of INTERFACES
    context_tokens: int | None = None  # the model's context; set: old observations elided to fit it
    aids: bool | None = None  # the repository map and the failing code; None: on for the tools interface
    map_chars: int = MAP_CHARS  # the repository map's budget in the task message

    @property
    def uses_aids(self) -> bool:
        """Whether the job gets the repository map and the failing code (see the module docstring)."""
        return self.aids if self.aids is not None else self.interface == "tools"

    @property
    def prompt(self) -> str:
        """The system prompt this job sends."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.interface == "tools":
            return SYSTEM_PROMPT_TOOLS
        return f"{SYSTEM_PROMPT} {TOOL_COMMANDS}" if self.uses_aids else SYSTEM_PROMPT

    def __post_init__(self) -> None:
        if self.interface not in INTERFACES:
            raise ValueError(f"unknown interface {self.interface!r}; known: {', '.join(INTERFACES)}")
        if self.hints not in HINT_STYLES:
            raise ValueError(f"unknown hint style {self.hints!r}; known: {', '.join(HINT_STYLES)}")
        if self.step_limit < 1:
            raise ValueError(f"step_limit must be >= 1, got {self.step_limit}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.map_chars < 0:
            raise ValueError(f"map_chars must be >= 0, got {self.map_chars}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.context_tokens is not None and self.context_tokens <= self.answer_reserve + MARGIN_TOKENS:
            raise ValueError(f"context_tokens {self.context_tokens} leaves no room for a prompt")
        self.escalation()  # validates the repeat knobs

    @property
    def answer_reserve(self) -> int:
        """Tokens of the context kept for the answer: ``max_tokens``, or 512 when the server decides."""
        return self.max_tokens if self.max_tokens is not None else 512

    def context_fit(self, context_tokens: int | None = None) -> ContextFit | None:
        """The job's context budget (None: the agent never elides), for ``context_tokens`` (default: the
        configured context)."""
        context = context_tokens or self.context_tokens
        if context is None or context <= self.answer_reserve + MARGIN_TOKENS:
            return None
        overhead = len(json.dumps(TOOLS)) if self.interface == "tools" else 0
        return ContextFit(context, self.answer_reserve, overhead_chars=overhead)

    def escalation(self) -> Escalation:
        """How repeats raise the temperature of this job's calls."""
        return Escalation(self.repeat_temperature_step, self.repeat_temperature_cap)


@dataclass
class AgentTurnRecord(TurnRecord):
    """A ``TurnRecord`` plus what the live agent measured: the command, its exit code and tool seconds.

    ``tool_sleep`` (the replay's time away from the engine) is set to the measured ``tool_seconds``, so
    replay and live-agent records read the same way; ``max_tokens`` is 0 when none was sent.
    ``temperature`` and ``seed`` are what the call was sent with (seed None: none sent); ``repeat_of``
    is the turn whose call this turn's call repeated (None: a new call).
    """

    tool_seconds: float | None = None
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    n_actions: int = 0
    submitted: bool = False
    finish_reason: str | None = None
    echoed_job_id: str | None = None
    temperature: float | None = None
    seed: int | None = None
    repeat_of: int | None = None


@dataclass
class AgentJobRecord(JobRecord):
    """A ``JobRecord`` plus the agent's exit status, step count, submission and whether its task's check
    passed afterwards (``solved``; None when the task has no check); ``repeats`` counts its repeated calls."""

    exit_status: str = ""
    steps: int = 0
    format_errors: int = 0
    repeats: int = 0
    task: str = ""
    submission: str | None = None
    solved: bool | None = None
    verdict: str | None = None  # why the judge said solved or not (agent_engine.agent.judge.Verdict)
    task_name: str | None = None
    elided: int = 0  # messages elided or shortened to fit the context
    refused: int = 0  # prompts the server refused as too long for the context (each shrunk and sent again)
    cut_answers: int = 0  # answers cut at the token limit (their edits and commands refused)
    branch_at: int | None = None  # messages before the first call that changed the repository
    attempts: int = 1  # attempts the job ran (agent_engine.agent.attempts)


@dataclass
class AgentJobResult:
    """One finished job: its records and the whole conversation."""

    turns: list[AgentTurnRecord]
    job: AgentJobRecord
    messages: list[dict[str, str]]


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
        rec.temperature, rec.seed = self.guard.sampling(step)
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
        outcome: ToolOutcome
        run = partial(run_tool_call, cut=reply.finish_reason == "length", failure_code=self.config.uses_aids,
                      output_chars=self.fit.observation_chars() if self.fit is not None else None)
        outcome, state = await self._in_sandbox(run, self.sandbox, call)
        self.record.format_errors += outcome.format_error
        rec.command, rec.exit_code, rec.timed_out = outcome.command or None, outcome.exit_code, outcome.timed_out
        rec.tool_name = tool_name_of(outcome.command) if outcome.tool_name == "bash" else outcome.tool_name or None
        rec.submitted = outcome.submitted
        if outcome.submitted:
            self.record.exit_status, self.record.submission = "Submitted", ""
        else:
            function = call.get("function") or {}
            raw = function.get("arguments")
            args = parse_arguments(raw)
            failed = outcome.format_error or outcome.timed_out or outcome.exit_code != 0
            note = self._repeat_note(rec, call_key(function.get("name"), raw if args is None else args), failed,
                                     outcome.exit_code, outcome.observation, state)
            advice = self.progress.advice(outcome, repeated=bool(note))
            observation = _with_note(_with_note(self._observation(outcome.observation), note), advice)
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
        return outcome.submitted


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
    if prefix is not None:
        messages = [dict(m) for m in prefix]
    else:
        the_map = await loop.run_in_executor(executor, repo_map, sandbox, config.map_chars, focus_words(task)) \
            if config.uses_aids and config.map_chars > 0 else None
        messages = list(initial_messages(task, config.prompt, the_map))
    state = await loop.run_in_executor(executor, tree_state, sandbox.workdir_fd)
    guard = RepeatGuard(config.temperature, config.seed, config.escalation(), state)
    job = _Job(client, sandbox, config, record, messages, t0, executor, on_turn, guard, progress=Progress(check),
               fit=config.context_fit(), final=final)
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
    record.trace_turns = record.turns
    if record.error is None and record.start_at is not None and record.end_at is not None:
        record.jct = record.end_at - record.start_at
    return AgentJobResult(job.turns, record, job.messages)
