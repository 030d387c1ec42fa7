"""Replay agent traces against an OpenAI-compatible server, each job a closed loop like a real agent.

Per job: turn 0's prompt is a job-unique header plus seeded random ids; turn i's prompt is turn i-1's
prompt, plus the ids the engine generated (``choices[0].token_ids``), plus fresh random ids standing
for the tool's output, so that its length follows the plan (``agent_engine.workloads.replay.plan``)
and the prefix is really shared. Each turn goes to ``POST /v1/completions`` as token ids with the
job hints of ``options.hints`` (a ``workloads.hint_styles`` style: by default ours, ``job_id``,
``is_last_step``, ``tool_name``; ``none`` sends no hint), the plan's ``max_tokens``, ``ignore_eos``
and ``temperature 0``; then the client sleeps the plan's tool time (never capped). A finished job
gets ``DELETE /v1/jobs/{job_id}`` when its style is ours.

Arrivals: Poisson with rate ``jps`` (the first job at t=0), or all at once; ``concurrency`` caps
the jobs in flight (closed loop when used alone).

Invariants:
- Fresh ids come from ``numpy.random.default_rng([seed, job_index])`` within
  ``[min_token_id, vocab_size)``, so a replay sends the same prompts for the same server outputs.
- Exactly one turn of a job is sent with ``is_last_step`` unless the job fails midway or the engine
  generated more than planned and the next prompt would outgrow ``max_model_len`` (then the job stops,
  marked truncated).
- Every job started gets its DELETE (style ``job_id``), failed or not; a failed request ends its job and
  is recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import numpy as np
from tqdm import tqdm

from agent_engine.json_types import JsonObject
from agent_engine.workloads.hint_styles import hint_fields, releases_jobs
from agent_engine.workloads.replay.plan import (
    JobPlan,
    ReplayOptions,
    TurnPlan,
    arrival_times,
    job_header,
    plan_job,
)
from agent_engine.workloads.replay.records import JobRecord, Record, TurnRecord, summarize
from agent_engine.workloads.sse_client import iter_sse_chunks, release_job, server_queue_delay
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


@dataclass
class ReplayResult:
    """Records of a replay (per job: its turns, then its job record) and their ``summarize``."""

    records: list[Record]
    summary: JsonObject

    @property
    def turns(self) -> list[TurnRecord]:
        return [r for r in self.records if isinstance(r, TurnRecord)]

    @property
    def jobs(self) -> list[JobRecord]:
        return [r for r in self.records if isinstance(r, JobRecord)]


@dataclass
class _Reply:
    ids: list[int]
    ttft: float | None
    cached: int | None
    queue: float | None


def _cached_tokens(usage: JsonObject | None, default: int | None = None) -> int | None:
    return ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens", default)


async def _complete_plain(client: httpx.AsyncClient, body: JsonObject, headers: dict[str, str]) -> _Reply:
    """One non-streamed completion."""
    resp = await client.post("/v1/completions", json=body, headers=headers)
    if resp.status_code != 200:
        raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
    data = resp.json()
    ids = (data.get("choices") or [{}])[0].get("token_ids")
    if ids is None:
        raise RuntimeError("the response lacks choices[0].token_ids (return_token_ids unsupported?)")
    return _Reply(list(ids), None, _cached_tokens(data.get("usage")), server_queue_delay(data))


async def _complete_stream(client: httpx.AsyncClient, body: JsonObject, headers: dict[str, str],
                           sent: float) -> _Reply:
    """One streamed (SSE) completion; the TTFT is measured from ``sent``."""
    reply = _Reply([], None, None, None)
    saw_ids = False
    async with client.stream("POST", "/v1/completions", json=body, headers=headers) as resp:
        async for chunk in iter_sse_chunks(resp):
            choices = chunk.get("choices") or []
            if choices:
                ids = choices[0].get("token_ids")
                if ids is not None:
                    saw_ids = True
                    reply.ids.extend(ids)
                if reply.ttft is None and (ids or choices[0].get("text")):
                    reply.ttft = time.perf_counter() - sent
            if chunk.get("usage"):
                reply.cached = _cached_tokens(chunk["usage"], reply.cached)
            q = server_queue_delay(chunk)
            if q is not None:
                reply.queue = q
    if not saw_ids:
        raise RuntimeError("the stream carried no choices[0].token_ids (return_token_ids unsupported?)")
    return reply


async def _complete(client: httpx.AsyncClient, body: JsonObject, headers: dict[str, str],
                    sent: float) -> _Reply:
    """Send one completion; stream (SSE) or not per ``body["stream"]``. Raises on any failure."""
    if body["stream"]:
        return await _complete_stream(client, body, headers, sent)
    return await _complete_plain(client, body, headers)


def _request_body(prompt: list[int], tp: TurnPlan, plan: JobPlan, options: ReplayOptions) -> JsonObject:
    body: JsonObject = {
        **options.extra_body,
        "prompt": prompt,
        "max_tokens": tp.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
        "stream": options.stream,
    }
    body.update(hint_fields(options.hints, plan.job_id, tp.is_last_step, tp.tool_name)[0])
    if options.stream:
        body["stream_options"] = {"include_usage": True}
    if options.model is not None:
        body["model"] = options.model
    return body


def _take_reply(rec: TurnRecord, job: JobRecord, reply: _Reply, sent: float, t0: float) -> None:
    """Fill a turn record (and its job's progress) from a successful reply."""
    done = time.perf_counter()
    rec.done_at, rec.latency, rec.ttft = done - t0, done - sent, reply.ttft
    rec.output_tokens, rec.cached_tokens = len(reply.ids), reply.cached
    rec.set_queue_delay(reply.queue, reply.ttft)
    job.end_at, job.turns = rec.done_at, job.turns + 1


async def _send_turns(client: httpx.AsyncClient, plan: JobPlan, job: JobRecord, t0: float,
                      options: ReplayOptions, out: list[Record]) -> None:
    """Send the plan's turns in order (appending their records to ``out``) until done or failed."""
    rng = np.random.default_rng([options.seed, plan.index])

    def fresh(n: int) -> list[int]:
        return rng.integers(options.min_token_id, options.vocab_size, max(0, n)).tolist()

    prompt: list[int] = []
    for tp in plan.turns:
        if tp.turn == 0:
            prompt = (job_header(plan.index, options) + fresh(tp.prompt_len))[: tp.prompt_len]
        else:
            prompt = prompt + fresh(tp.prompt_len - len(prompt))
        if options.max_model_len is not None and len(prompt) + tp.max_tokens > options.max_model_len:
            job.truncated = True  # the engine generated more than planned; stop before overflowing
            return
        sent = time.perf_counter()
        rec = TurnRecord(plan.job_id, tp.turn, sent - t0, prompt_tokens=len(prompt), max_tokens=tp.max_tokens,
                         is_last_step=tp.is_last_step, tool_name=tp.tool_name, tool_sleep=tp.sleep_s)
        out.append(rec)
        if job.start_at is None:
            job.start_at = rec.sent_at
        try:
            headers = hint_fields(options.hints, plan.job_id, tp.is_last_step, tp.tool_name)[1]
            reply = await _complete(client, _request_body(prompt, tp, plan, options), headers, sent)
        except Exception as e:  # any failure ends the job, and is recorded
            rec.error = job.error = f"{type(e).__name__}: {e}"
            return
        _take_reply(rec, job, reply, sent, t0)
        prompt = prompt + reply.ids
        if tp.sleep_s > 0:
            await asyncio.sleep(tp.sleep_s)


async def _run_job(
    client: httpx.AsyncClient, plan: JobPlan, arrival: float, t0: float, options: ReplayOptions
) -> list[Record]:
    """Replay one job; returns its turn records followed by its job record."""
    job = JobRecord(
        plan.job_id, plan.trace_job_id, arrival, trace_turns=plan.trace_turns, truncated=plan.truncated
    )
    out: list[Record] = []
    try:
        await _send_turns(client, plan, job, t0, options, out)
    finally:
        if releases_jobs(options.hints):
            await release_job(client, plan.job_id)
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
