"""Replay agent traces against an OpenAI-compatible server, each job a closed loop like a real agent.

Per job: turn 0's prompt is a job-unique header plus seeded random ids; turn i's prompt is turn i-1's
prompt, plus the ids the engine generated (``choices[0].token_ids``), plus fresh random ids standing
for the tool's output, so that its length follows the trace's ``prompt_tokens * token_scale`` and the
prefix is really shared. Each turn goes to ``POST /v1/completions`` as token ids with the agent hints
(``job_id``, ``is_last_step``, ``tool_name``) and ``max_tokens = max(1, round(output * token_scale))``,
``ignore_eos``, ``temperature 0``; then the client sleeps the turn's ``tool_seconds * time_scale``
(never capped; negative trace gaps count as 0). A finished job gets ``DELETE /v1/jobs/{job_id}``.

Arrivals: Poisson with rate ``jps`` (the first job at t=0), or all at once; ``concurrency`` caps
the jobs in flight (closed loop when used alone).

Invariants:
- Token ids are in ``[min_token_id, vocab_size)`` (specials live below ``min_token_id``); fresh ids
  come from ``numpy.random.default_rng([seed, job_index])``, so a replay sends the same prompts for
  the same server outputs.
- ``plan_job`` decides every turn's target length, ``max_tokens``, sleep and ``is_last_step`` up front,
  assuming the engine generates exactly ``max_tokens`` (``ignore_eos``); with ``max_model_len`` the
  job keeps the longest prefix of turns whose ``prompt + max_tokens`` fit, and its last kept turn
  carries ``is_last_step``. Exactly one turn of a job is sent with ``is_last_step`` unless the job
  fails midway.
- Every job started gets its DELETE, failed or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
from tqdm import tqdm

from agent_engine.workloads.replay.records import JobRecord, Record, TurnRecord, summarize
from agent_engine.workloads.sse_client import iter_sse_chunks, server_queue_delay
from agent_engine.workloads.traces.format import TraceJob

__all__ = [
    "JobPlan",
    "ReplayOptions",
    "ReplayResult",
    "TurnPlan",
    "arrival_times",
    "plan_job",
    "replay",
    "replay_sync",
]

HEADER_LEN = 2  # the job index in base (vocab_size - min_token_id): unique prefixes for 15M jobs


@dataclass(frozen=True)
class ReplayOptions:
    """Knobs of a replay (see the module docstring); ``None`` means unlimited / not used."""

    jps: float | None = None
    concurrency: int | None = None
    max_jobs: int | None = None
    max_turns: int | None = None
    token_scale: float = 1.0
    time_scale: float = 1.0
    seed: int = 0
    model: str | None = None
    vocab_size: int = 4000
    min_token_id: int = 16
    max_model_len: int | None = None
    stream: bool = True
    request_timeout: float = 600.0
    connect_timeout: float = 10.0
    job_id_prefix: str | None = None  # default "replay{seed}-"
    progress: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.jps is not None and self.jps <= 0:
            raise ValueError("jps must be > 0")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.token_scale <= 0 or self.time_scale < 0:
            raise ValueError("token_scale must be > 0 and time_scale >= 0")
        if not 0 <= self.min_token_id < self.vocab_size:
            raise ValueError("need 0 <= min_token_id < vocab_size")
        if self.max_model_len is not None and self.max_model_len < HEADER_LEN + 1:
            raise ValueError(f"max_model_len must be >= {HEADER_LEN + 1}")


@dataclass(frozen=True)
class TurnPlan:
    """What one turn sends: its target prompt length, ``max_tokens``, hints and the sleep after it."""

    turn: int
    prompt_len: int
    max_tokens: int
    is_last_step: bool
    tool_name: str | None
    sleep_s: float


@dataclass(frozen=True)
class JobPlan:
    """A job's replay plan; ``truncated``: turns were dropped (``max_turns`` or ``max_model_len``)."""

    index: int
    job_id: str
    trace_job_id: str
    turns: tuple[TurnPlan, ...]
    trace_turns: int
    truncated: bool


@dataclass
class ReplayResult:
    """Records of a replay (per job: its turns, then its job record) and their ``summarize``."""

    records: list[Record]
    summary: dict[str, Any]

    @property
    def turns(self) -> list[TurnRecord]:
        return [r for r in self.records if isinstance(r, TurnRecord)]

    @property
    def jobs(self) -> list[JobRecord]:
        return [r for r in self.records if isinstance(r, JobRecord)]


def plan_job(job: TraceJob, index: int, options: ReplayOptions) -> JobPlan:
    """The turns to send for ``job`` (pure; see the module invariants)."""
    s, limit = options.token_scale, options.max_model_len
    src = job.turns[: options.max_turns] if options.max_turns else job.turns
    truncated = len(src) < len(job.turns)
    raw: list[tuple[int, int]] = []
    prev_len = prev_out = 0
    for i, t in enumerate(src):
        max_tokens = max(1, round(t.output_tokens * s))
        length = max(1, round(t.prompt_tokens * s))
        if i > 0:
            length = max(length, prev_len + prev_out)
        if limit is not None:
            if i == 0:
                max_tokens = min(max_tokens, limit - HEADER_LEN)
                length = min(max(length, HEADER_LEN), limit - max_tokens)
            elif length + max_tokens > limit:
                truncated = True
                break
        raw.append((length, max_tokens))
        prev_len, prev_out = length, max_tokens
    n = len(raw)
    plans = []
    for i, (length, max_tokens) in enumerate(raw):
        gap = src[i].tool_seconds
        sleep = 0.0 if i == n - 1 or gap is None else max(0.0, float(gap)) * options.time_scale
        plans.append(TurnPlan(i, length, max_tokens, i == n - 1, src[i].tool_name, sleep))
    prefix = options.job_id_prefix if options.job_id_prefix is not None else f"replay{options.seed}-"
    return JobPlan(index, f"{prefix}{index:05d}", job.job_id, tuple(plans), len(job.turns), truncated)


def arrival_times(n: int, options: ReplayOptions) -> list[float]:
    """Job arrival offsets (seconds): Poisson with rate ``jps`` starting at 0, else all 0."""
    if n == 0:
        return []
    if options.jps is None:
        return [0.0] * n
    gaps = np.random.default_rng([options.seed, 1 << 30]).exponential(1.0 / options.jps, n)
    gaps[0] = 0.0
    return np.cumsum(gaps).tolist()


def _header(index: int, options: ReplayOptions) -> list[int]:
    base = options.vocab_size - options.min_token_id
    return [options.min_token_id + (index // base**k) % base for k in range(HEADER_LEN)]


@dataclass
class _Reply:
    ids: list[int]
    ttft: float | None
    cached: int | None
    queue: float | None


async def _complete(client: httpx.AsyncClient, body: dict[str, Any], sent: float) -> _Reply:
    """Send one completion; stream (SSE) or not per ``body["stream"]``. Raises on any failure."""
    if not body["stream"]:
        resp = await client.post("/v1/completions", json=body)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        ids = (data.get("choices") or [{}])[0].get("token_ids")
        if ids is None:
            raise RuntimeError("the response lacks choices[0].token_ids (return_token_ids unsupported?)")
        details = (data.get("usage") or {}).get("prompt_tokens_details") or {}
        return _Reply(list(ids), None, details.get("cached_tokens"), server_queue_delay(data))
    reply = _Reply([], None, None, None)
    saw_ids = False
    async with client.stream("POST", "/v1/completions", json=body) as resp:
        async for chunk in iter_sse_chunks(resp):
            choices = chunk.get("choices") or []
            if choices:
                ids = choices[0].get("token_ids")
                if ids is not None:
                    saw_ids = True
                    reply.ids.extend(ids)
                if reply.ttft is None and (ids or choices[0].get("text")):
                    reply.ttft = time.perf_counter() - sent
            usage = chunk.get("usage")
            if usage:
                reply.cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", reply.cached)
            q = server_queue_delay(chunk)
            if q is not None:
                reply.queue = q
    if not saw_ids:
        raise RuntimeError("the stream carried no choices[0].token_ids (return_token_ids unsupported?)")
    return reply


async def _run_job(
    client: httpx.AsyncClient, plan: JobPlan, arrival: float, t0: float, options: ReplayOptions
) -> list[Record]:
    """Replay one job; returns its turn records followed by its job record."""
    rng = np.random.default_rng([options.seed, plan.index])

    def fresh(n: int) -> list[int]:
        return rng.integers(options.min_token_id, options.vocab_size, max(0, n)).tolist()

    job = JobRecord(
        plan.job_id, plan.trace_job_id, arrival, trace_turns=plan.trace_turns, truncated=plan.truncated
    )
    out: list[Record] = []
    prompt: list[int] = []
    try:
        for tp in plan.turns:
            if tp.turn == 0:
                prompt = (_header(plan.index, options) + fresh(tp.prompt_len))[: tp.prompt_len]
            else:
                prompt = prompt + fresh(tp.prompt_len - len(prompt))
            if options.max_model_len is not None and len(prompt) + tp.max_tokens > options.max_model_len:
                job.truncated = True  # the engine generated more than planned; stop before overflowing
                break
            body: dict[str, Any] = {
                **options.extra_body,
                "prompt": prompt,
                "max_tokens": tp.max_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "return_token_ids": True,
                "job_id": plan.job_id,
                "is_last_step": tp.is_last_step,
                "tool_name": tp.tool_name,
                "stream": options.stream,
            }
            if options.stream:
                body["stream_options"] = {"include_usage": True}
            if options.model is not None:
                body["model"] = options.model
            sent = time.perf_counter()
            rec = TurnRecord(
                plan.job_id,
                tp.turn,
                sent - t0,
                prompt_tokens=len(prompt),
                max_tokens=tp.max_tokens,
                is_last_step=tp.is_last_step,
                tool_name=tp.tool_name,
                tool_sleep=tp.sleep_s,
            )
            out.append(rec)
            if job.start_at is None:
                job.start_at = rec.sent_at
            try:
                reply = await _complete(client, body, sent)
            except Exception as e:  # any failure ends the job, and is recorded
                rec.error = job.error = f"{type(e).__name__}: {e}"
                break
            done = time.perf_counter()
            rec.done_at, rec.latency, rec.ttft = done - t0, done - sent, reply.ttft
            rec.output_tokens, rec.cached_tokens = len(reply.ids), reply.cached
            if reply.queue is not None:
                rec.queue_delay, rec.queue_source = reply.queue, "server"
            elif reply.ttft is not None:
                rec.queue_delay, rec.queue_source = reply.ttft, "ttft"
            job.end_at, job.turns = rec.done_at, job.turns + 1
            prompt = prompt + reply.ids
            if tp.sleep_s > 0:
                await asyncio.sleep(tp.sleep_s)
    finally:
        try:
            await client.delete(f"/v1/jobs/{quote(plan.job_id, safe='')}")
        except httpx.HTTPError:
            pass
    if job.error is None and job.start_at is not None and job.end_at is not None:
        job.jct = job.end_at - job.start_at
    out.append(job)
    return out


async def replay(url: str, jobs: Sequence[TraceJob], options: ReplayOptions | None = None) -> ReplayResult:
    """Replay ``jobs`` against the server at ``url`` (``http://host:port``); see the module docstring."""
    options = options or ReplayOptions()
    jobs = list(jobs)[: options.max_jobs] if options.max_jobs is not None else list(jobs)
    plans = [plan_job(j, i, options) for i, j in enumerate(jobs)]
    arrivals = arrival_times(len(plans), options)
    sem = asyncio.Semaphore(options.concurrency) if options.concurrency else None
    timeout = httpx.Timeout(options.request_timeout, connect=options.connect_timeout, pool=None)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    results: list[list[Record]] = [[] for _ in plans]
    bar = tqdm(total=len(plans), desc="jobs", unit="job", disable=not options.progress)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout, limits=limits) as client:

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, t0 + arrivals[i] - time.perf_counter()))
            if sem is None:
                results[i] = await _run_job(client, plans[i], arrivals[i], t0, options)
            else:
                async with sem:  # closed loop: a job "arrives" when it gets a slot
                    arrival = arrivals[i] if options.jps is not None else time.perf_counter() - t0
                    results[i] = await _run_job(client, plans[i], arrival, t0, options)
            bar.update(1)

        try:
            await asyncio.gather(*(one(i) for i in range(len(plans))))
        finally:
            bar.close()
    records = [r for rs in results for r in rs]
    return ReplayResult(records, summarize(records))


def replay_sync(url: str, jobs: Sequence[TraceJob], options: ReplayOptions | None = None) -> ReplayResult:
    """``replay`` run to completion in a fresh event loop."""
    return asyncio.run(replay(url, jobs, options))
