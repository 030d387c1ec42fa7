"""One agent job against an OpenAI-compatible chat endpoint, mini-swe-agent style.

The conversation is: a system prompt, the task (``TASK_TEMPLATE``), then per step the model's answer
(assistant) and the observation of the command it issued (user). Each answer must hold exactly ONE
fenced ```bash block; zero or several blocks get a format-error observation instead of a run. The
command runs in the job's ``Sandbox``. The job ends when a command's first output line is
``SUBMIT_MARKER`` (exit status "Submitted"; the rest of the output is the submission), when
``step_limit`` model calls were made ("LimitsExceeded"), or on a failed model call (exit status the
error's class name, ``JobRecord.error`` set).

Invariants:
- Every model call carries ``job_id``; ``is_last_step`` is true exactly on the call with index
  ``step_limit - 1`` (the last one the job may make). The job gets ``DELETE /v1/jobs/{job_id}`` when it
  ends, whatever the reason.
- One ``AgentTurnRecord`` per model call, in order, then one ``AgentJobRecord``; times are seconds from
  the runner's clock origin ``t0`` (``time.perf_counter`` based), as in ``agent_engine.workloads.replay.records``.
- ``tool_seconds`` of a turn is the wall time from the end of the model's answer to the command's
  result (parsing, sandbox and observation included), i.e. the time the job is away from the engine.
- The prompt templates here are the single source of truth: ``tiny_agent_model`` renders its training
  transcripts with the same functions, so the trained model sees exactly what this loop sends.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from agent_engine.agent.sandbox import CommandResult, Sandbox
from agent_engine.workloads.replay.records import JobRecord, TurnRecord
from agent_engine.workloads.sse_client import iter_sse_chunks, server_queue_delay
from estimator.tool_parser import parse_shell

__all__ = [
    "SUBMIT_MARKER",
    "AgentConfig",
    "AgentJobRecord",
    "AgentJobResult",
    "AgentTurnRecord",
    "ChatReply",
    "format_error_message",
    "initial_messages",
    "is_submission",
    "observation_message",
    "parse_actions",
    "run_agent_job",
    "stream_chat",
    "tool_name_of",
]

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"

SYSTEM_PROMPT = (
    "You are an agent that solves tasks in a shell. Reply with exactly one ```bash block holding one "
    f"command. When done, run `{SUBMIT_COMMAND}`."
)
TASK_TEMPLATE = "Task: {task}"
OBSERVATION_TEMPLATE = "<returncode>{exit_code}</returncode>\n<output>\n{output}</output>"
FORMAT_ERROR_TEMPLATE = "Format error: reply with EXACTLY ONE ```bash block; found {n}."

_ACTION = re.compile(r"```bash[ \t]*\r?\n(.*?)\r?\n?```", re.S)


@dataclass(frozen=True)
class AgentConfig:
    """Knobs of one agent job; ``max_tokens=None`` lets the server fill up to the context."""

    step_limit: int = 30
    max_tokens: int | None = None
    temperature: float = 0.0
    model: str | None = None
    system_prompt: str = SYSTEM_PROMPT
    stream: bool = True

    def __post_init__(self) -> None:
        if self.step_limit < 1:
            raise ValueError(f"step_limit must be >= 1, got {self.step_limit}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


@dataclass
class AgentTurnRecord(TurnRecord):
    """A ``TurnRecord`` plus what the live agent measured: the command, its exit code and tool seconds.

    ``tool_sleep`` (the replay's time away from the engine) is set to the measured ``tool_seconds``, so
    replay and live-agent records read the same way; ``max_tokens`` is 0 when none was sent.
    """

    tool_seconds: float | None = None
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    n_actions: int = 0
    submitted: bool = False
    finish_reason: str | None = None
    echoed_job_id: str | None = None


@dataclass
class AgentJobRecord(JobRecord):
    """A ``JobRecord`` plus the agent's exit status, step count and submission."""

    exit_status: str = ""
    steps: int = 0
    format_errors: int = 0
    task: str = ""
    submission: str | None = None


@dataclass
class AgentJobResult:
    """One finished job: its records and the whole conversation."""

    turns: list[AgentTurnRecord]
    job: AgentJobRecord
    messages: list[dict[str, str]]


# --------------------------------------------------------------------------- prompts and parsing


def initial_messages(task: str, system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The system prompt and the task message that open every job."""
    return [{"role": "system", "content": system_prompt},
            {"role": "user", "content": TASK_TEMPLATE.format(task=task)}]


def observation_message(result: CommandResult) -> dict[str, str]:
    """The user message reporting a command's result."""
    return {"role": "user", "content": OBSERVATION_TEMPLATE.format(exit_code=result.exit_code, output=result.output)}


def format_error_message(n_actions: int) -> dict[str, str]:
    """The user message sent back when an answer holds ``n_actions != 1`` bash blocks."""
    return {"role": "user", "content": FORMAT_ERROR_TEMPLATE.format(n=n_actions)}


def parse_actions(text: str) -> list[str]:
    """The bodies of all fenced ```bash blocks of ``text``, in order."""
    return [m.group(1) for m in _ACTION.finditer(text)]


def is_submission(command: str, output: str) -> bool:
    """True when the command submits: its output's first line is the marker (or it is the echo itself)."""
    lines = output.lstrip().splitlines()
    return (bool(lines) and lines[0].strip() == SUBMIT_MARKER) or command.strip() == SUBMIT_COMMAND


def submission_of(output: str) -> str:
    """What the job submitted: the output after the marker line."""
    lines = output.lstrip().splitlines(keepends=True)
    return "".join(lines[1:])


def tool_name_of(command: str) -> str:
    """The trace name of a command (``bash:<program>``), ``bash`` when no program can be named."""
    call = parse_shell(command)
    return call.name if call is not None else "bash"


# --------------------------------------------------------------------------- one model call


@dataclass
class ChatReply:
    """What one chat completion returned (``ttft`` only when streamed)."""

    text: str = ""
    ttft: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    queue_delay: float | None = None
    finish_reason: str | None = None
    job_id: str | None = None


def _take_usage(reply: ChatReply, usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    reply.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    reply.output_tokens = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    reply.cached_tokens = None if cached is None else int(cached)


async def stream_chat(client: httpx.AsyncClient, body: dict[str, Any], sent: float) -> ChatReply:
    """POST ``body`` to ``/v1/chat/completions`` (SSE when ``body["stream"]``); raises on any failure."""
    reply = ChatReply()
    if not body.get("stream"):
        resp = await client.post("/v1/chat/completions", json=body)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        choice = (data.get("choices") or [{}])[0]
        reply.text = (choice.get("message") or {}).get("content") or ""
        reply.finish_reason, reply.job_id = choice.get("finish_reason"), data.get("job_id")
        _take_usage(reply, data.get("usage"))
        reply.queue_delay = server_queue_delay(data)
        return reply
    parts: list[str] = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        async for chunk in iter_sse_chunks(resp):
            reply.job_id = chunk.get("job_id", reply.job_id)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or ""
                if text and reply.ttft is None:
                    reply.ttft = time.perf_counter() - sent
                parts.append(text)
                reply.finish_reason = choice.get("finish_reason") or reply.finish_reason
            _take_usage(reply, chunk.get("usage"))
            q = server_queue_delay(chunk)
            if q is not None:
                reply.queue_delay = q
    reply.text = "".join(parts)
    return reply


# --------------------------------------------------------------------------- the job


def _request_body(config: AgentConfig, messages: list[dict[str, str]], job_id: str, last: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": messages, "temperature": config.temperature, "job_id": job_id,
                            "is_last_step": last, "stream": config.stream}
    if config.stream:
        body["stream_options"] = {"include_usage": True}
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    if config.model is not None:
        body["model"] = config.model
    return body


async def run_agent_job(client: httpx.AsyncClient, task: str, sandbox: Sandbox, job_id: str,
                        config: AgentConfig, *, t0: float, executor: Executor | None = None,
                        on_turn: Callable[[AgentTurnRecord], None] | None = None) -> AgentJobResult:
    """Run one job to its end (see the module docstring); commands run on ``executor`` threads."""
    loop = asyncio.get_running_loop()
    messages = initial_messages(task, config.system_prompt)
    job = AgentJobRecord(job_id, job_id, time.perf_counter() - t0, task=task)
    turns: list[AgentTurnRecord] = []
    try:
        for step in range(config.step_limit):
            last = step == config.step_limit - 1
            sent = time.perf_counter()
            rec = AgentTurnRecord(job_id, step, sent - t0, is_last_step=last,
                                  max_tokens=config.max_tokens or 0)
            turns.append(rec)
            if job.start_at is None:
                job.start_at = rec.sent_at
            try:
                reply = await stream_chat(client, _request_body(config, messages, job_id, last), sent)
            except Exception as e:  # a failed call ends the job, and is recorded
                rec.error = job.error = f"{type(e).__name__}: {e}"
                job.exit_status = type(e).__name__
                break
            done = time.perf_counter()
            rec.done_at, rec.latency, rec.ttft = done - t0, done - sent, reply.ttft
            rec.prompt_tokens, rec.output_tokens = reply.prompt_tokens, reply.output_tokens
            rec.cached_tokens, rec.finish_reason, rec.echoed_job_id = reply.cached_tokens, reply.finish_reason, reply.job_id
            if reply.queue_delay is not None:
                rec.queue_delay, rec.queue_source = reply.queue_delay, "server"
            elif reply.ttft is not None:
                rec.queue_delay, rec.queue_source = reply.ttft, "ttft"
            job.end_at, job.turns, job.steps = rec.done_at, job.turns + 1, job.steps + 1
            messages.append({"role": "assistant", "content": reply.text})
            actions = parse_actions(reply.text)
            rec.n_actions = len(actions)
            if len(actions) != 1:
                job.format_errors += 1
                messages.append(format_error_message(len(actions)))
                rec.tool_seconds = rec.tool_sleep = time.perf_counter() - done
                if on_turn is not None:
                    on_turn(rec)
                continue
            rec.command, rec.tool_name = actions[0], tool_name_of(actions[0])
            result = await loop.run_in_executor(executor, sandbox.run, actions[0])
            rec.exit_code, rec.timed_out = result.exit_code, result.timed_out
            rec.submitted = is_submission(actions[0], result.output)
            if not rec.submitted:
                messages.append(observation_message(result))
            rec.tool_seconds = rec.tool_sleep = time.perf_counter() - done
            if on_turn is not None:
                on_turn(rec)
            if rec.submitted:
                job.exit_status, job.submission = "Submitted", submission_of(result.output)
                break
        else:
            job.exit_status, job.truncated = "LimitsExceeded", True
    finally:
        try:
            await client.delete(f"/v1/jobs/{quote(job_id, safe='')}")
        except httpx.HTTPError:
            pass
    job.trace_turns = job.turns
    if job.error is None and job.start_at is not None and job.end_at is not None:
        job.jct = job.end_at - job.start_at
    return AgentJobResult(turns, job, messages)
