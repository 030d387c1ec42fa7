"""Run many agent jobs concurrently against a server; record them and save them as benchmark traces.

Invariants:
- At most ``concurrency`` jobs are in flight; each job gets its own fresh ``Sandbox`` (a temp copy of
  its repo), removed when the job ends; sandbox commands run on a thread pool of ``concurrency``
  threads, so one job's command never waits for another job's command.
- A task with a ``check`` is judged in the job's own sandbox after the job ended (its last answer
  and command done, its job released) and before the sandbox is closed, on the pristine check files
  (``agent_engine.agent.judge``: read-only during the job, put back before the check runs; its tests
  must run and pass); ``AgentJobRecord.solved`` is the verdict (False when the sandbox never
  started), None for a task without a check, and ``AgentJobRecord.verdict`` says why.
  ``summary["solved"]`` counts the solved jobs and ``summary["checked"]`` the jobs that had a check;
  ``summary["repeats"]`` the repeated calls of all jobs (``agent_engine.agent.repeats``).
- With ``options.rewrites`` on and a task with a check, the job opens with the rewrite stage
  (``agent_engine.agent.rewrites``) in its own sandbox, judged like an attempt; solved, the job ends
  there (``summary["solved_by_rewrites"]``), else the agent's attempts follow, the later ones branching
  from the first agent attempt.
- With ``options.attempts`` above 1, a job whose check does not pass makes another attempt branching
  from the first one's localization (``agent_engine.agent.attempts``), until one is solved or the
  attempts are spent; ``summary["solved_first_attempt"]`` is pass@1, ``summary["attempts"]`` the
  attempts run.
- ``job_ids`` are unique within a run: ``{prefix}{index}`` unless a task names its own id.
- With ``options.transcripts``, every judged attempt's conversation is written there
  (``agent_engine.agent.transcripts``).
- ``AgentRunResult.records`` holds, per job in task order, its ``AgentTurnRecord``s then its
  ``AgentJobRecord``; ``agent_engine.workloads.replay.records.write_records``/``summarize`` work on
  them as is.
- The API key goes only into the HTTP client's headers (never into a sandbox's environment). The
  sandbox's confinement (``isolation``, ``allow_network``) is resolved once before any job starts: a
  confinement this machine cannot give raises ValueError there; ``summary["sandbox"]`` is what
  ``Sandbox.enforced()`` reported, logged once, with a warning naming each protection that is off.
- ``to_trace_job`` maps one job onto the trace format (``agent_engine.workloads.traces.format``): one turn per
  model call that got an answer, ``llm_seconds`` = client latency, ``tool_seconds`` = measured tool time
  (``None`` on the last turn), ``tool_names``/``n_tool_calls`` from the parsed command. Prompts may
  not grow by more than the last answer when the server re-tokenises an answer into fewer tokens; the
  trace's monotonic-prompt invariant is restored by raising such a ``prompt_tokens`` to the minimum
  (the measured value is kept as ``measured_prompt_tokens``), so every saved job validates.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from tqdm import tqdm

from agent_engine.agent.attempts import AttemptPolicy, branch_prefix, merged
from agent_engine.agent.judge import Verdict, check_paths, judge, protect
from agent_engine.agent.loop import AgentConfig, AgentJobRecord, AgentJobResult, run_agent_job
from agent_engine.agent.rewrites import MUTANT_PASSED, REWRITE_PASSED, RewritePolicy, rewrite_stage
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.sandbox.confine import resolve
from agent_engine.agent.task_set import AgentTask, load_tasks
from agent_engine.agent.transcripts import TranscriptWriter
from agent_engine.workloads.hint_styles import releases_jobs
from agent_engine.workloads.replay.records import Record, summarize
from agent_engine.workloads.sse_client import release_job
from agent_engine.workloads.traces.format import TraceJob, TraceTurn

__all__ = ["AgentRunResult", "AgentTask", "RunOptions", "load_tasks", "run_agent_jobs", "run_agent_jobs_sync",
           "to_trace_job"]

TRACE_SOURCE = "agent-engine-agent"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """Where to send requests and how many jobs at once; ``agent`` holds the per-job knobs."""

    base_url: str
    agent: AgentConfig = field(default_factory=AgentConfig)
    concurrency: int = 1
    command_timeout: float = 60.0
    max_output_chars: int = 10000
    api_key: str | None = None
    request_timeout: float = 600.0
    job_id_prefix: str | None = None  # default "agent-<8 hex>-"
    progress: bool = True
    allow_network: bool = False
    isolation: str = "auto"  # see agent_engine.agent.sandbox.ISOLATION_MODES
    transport: httpx.AsyncBaseTransport | None = None  # tests: an in-process fake server
    attempts: AttemptPolicy = field(default_factory=AttemptPolicy)  # attempts per job (agent_engine.agent.attempts)
    transcripts: str | None = None  # folder for each attempt's conversation (agent_engine.agent.transcripts)
    rewrites: RewritePolicy = field(default_factory=RewritePolicy)  # the stage before the agent (0 samples: none)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")


@dataclass
class AgentRunResult:
    """All records of a run, the jobs as trace jobs, and the summary of the records."""

    results: list[AgentJobResult]
    records: list[Record]
    trace_jobs: list[TraceJob]
    summary: dict[str, Any]


def to_trace_job(result: AgentJobResult, model: str | None = None) -> TraceJob | None:
    """The job in the trace format, or None when no model call got an answer."""
    done = [t for t in result.turns if t.error is None]
    if not done:
        return None
    turns: list[TraceTurn] = []
    floor = 0
    for i, t in enumerate(done):
        extra: dict[str, Any] = {"tool_names": [t.tool_name] if t.tool_name else [],
                                 "n_tool_calls": 1 if t.tool_name else 0}
        prompt = max(t.prompt_tokens, floor, 1)
        if prompt != t.prompt_tokens:
            extra["measured_prompt_tokens"] = t.prompt_tokens
        last = i == len(done) - 1
        tool_seconds = None if last else float(t.tool_seconds or 0.0)
        turns.append(TraceTurn(prompt, t.output_tokens, t.tool_name, tool_seconds, t.cached_tokens, t.latency,
                               extra))
        floor = prompt + t.output_tokens
    meta: dict[str, Any] = {"source": TRACE_SOURCE, "model": model, "exit_status": result.job.exit_status,
                            "task": result.job.task}
    if result.job.solved is not None:
        meta["solved"] = result.job.solved
    return TraceJob(result.job.job_id, turns, meta)


async def run_agent_jobs(tasks: list[AgentTask], options: RunOptions) -> AgentRunResult:
    """Run every task as one job (at most ``options.concurrency`` at once); never raises for a failed job."""
    prefix = options.job_id_prefix if options.job_id_prefix is not None else f"agent-{uuid.uuid4().hex[:8]}-"
    ids = [t.job_id or f"{prefix}{i}" for i, t in enumerate(tasks)]
    if len(set(ids)) != len(ids):
        raise ValueError("job ids must be unique")
    resolve(options.isolation, options.allow_network)  # fail before any job when it cannot be had
    transcripts = TranscriptWriter(options.transcripts) if options.transcripts else None
    enforced: dict[str, bool] = {}
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    timeout = httpx.Timeout(options.request_timeout, connect=10.0)
    limits = httpx.Limits(max_connections=options.concurrency + 4)
    gate = asyncio.Semaphore(options.concurrency)
    t0 = time.perf_counter()
    bar = tqdm(total=len(tasks), desc="agent jobs", unit="job", disable=not options.progress)
    with ThreadPoolExecutor(max_workers=options.concurrency, thread_name_prefix="agent-sandbox") as pool:
        async with httpx.AsyncClient(base_url=options.base_url, headers=headers, timeout=timeout,
                                     limits=limits, transport=options.transport) as client:
            agent = options.agent
            context = agent.context_tokens or await _context_tokens(client, agent.model)
            output_chars = min(options.max_output_chars, context or options.max_output_chars)
            if agent.context_tokens is None and context is not None:  # the server said: fit the jobs to it
                agent = replace(agent, context_tokens=context)

            async def one(task: AgentTask, job_id: str) -> AgentJobResult:
                async with gate:
                    try:
                        return await _attempts(client, task, job_id, agent, options, output_chars, pool, t0,
                                               enforced, transcripts)
                    finally:
                        bar.update(1)

            results = list(await asyncio.gather(*(one(t, j) for t, j in zip(tasks, ids, strict=True))))
    bar.close()
    records: list[Record] = []
    for r in results:
        records.extend(r.turns)
        records.append(r.job)
    model = options.agent.model
    trace_jobs = [j for j in (to_trace_job(r, model) for r in results) if j is not None]
    summary = summarize(records)
    summary["exit_statuses"] = dict(Counter(r.job.exit_status for r in results))
    summary["steps_mean"] = sum(r.job.steps for r in results) / len(results) if results else None
    summary["format_errors"] = sum(r.job.format_errors for r in results)
    summary["repeats"] = sum(r.job.repeats for r in results)
    summary["solved"] = sum(1 for r in results if r.job.solved)
    summary["solved_first_attempt"] = sum(1 for r in results if r.job.solved and r.job.attempts == 1)
    summary["attempts"] = sum(r.job.attempts for r in results)
    summary["solved_by_rewrites"] = sum(1 for r in results if r.job.solved and r.job.exit_status == REWRITE_PASSED)
    summary["solved_by_mutants"] = sum(1 for r in results if r.job.solved and r.job.exit_status == MUTANT_PASSED)
    summary["checked"] = sum(1 for t in tasks if t.check is not None)
    summary["sandbox"] = enforced
    return AgentRunResult(results, records, trace_jobs, summary)


async def _attempts(client: httpx.AsyncClient, task: AgentTask, job_id: str, agent: AgentConfig,
                    options: RunOptions, output_chars: int, pool: ThreadPoolExecutor, t0: float,
                    enforced: dict[str, bool], transcripts: TranscriptWriter | None) -> AgentJobResult:
    """One job: with rewrites on and a check, the rewrite stage first (``agent_engine.agent.rewrites``);
    then, unless it solved the task, its attempts, each in its own sandbox and judged there, until one is
    solved (``agent_engine.agent.attempts``); a task without a check makes one attempt. Each judged
    attempt's conversation (the stage's too) goes to ``transcripts`` when given."""
    policy = options.attempts
    n = policy.attempts if task.check is not None or task.tests is not None else 1
    results: list[AgentJobResult] = []
    if options.rewrites.enabled and task.check is not None:
        staged = await _judged(task, options, output_chars, pool, enforced, transcripts, 1, lambda sandbox: rewrite_stage(
            client, task.task, sandbox, job_id, agent, options.rewrites, str(task.check), t0=t0, executor=pool))
        if isinstance(staged, AgentJobResult):
            results.append(staged)
            if staged.job.solved:
                if releases_jobs(agent.hints):
                    await release_job(client, job_id)
                return merged(results, 0)
    first = len(results)  # the first agent attempt: later ones branch from its reads
    prefix: list[dict[str, Any]] | None = None
    for k in range(n):
        result = await _judged(task, options, output_chars, pool, enforced, transcripts, len(results) + 1,
                               lambda sandbox, k=k, prefix=prefix: run_agent_job(
                                   client, task.task, sandbox, job_id, policy.config_for(agent, k), t0=t0,
                                   executor=pool, check=task.check, prefix=prefix, final=k == n - 1))
        if not isinstance(result, AgentJobResult):  # the attempt cannot start: record it as failed
            if not results:
                return _failed_job(task, job_id, time.perf_counter() - t0, result)
            break
        results.append(result)
        if result.job.solved or result.job.error is not None:
            break
        prefix = branch_prefix(results[first])
    if len(results) - first < n and releases_jobs(agent.hints):  # ended before the final attempt: release now
        await release_job(client, job_id)
    chosen = next((i for i, r in enumerate(results) if r.job.solved), len(results) - 1)
    return merged(results, chosen)


async def _judged(task: AgentTask, options: RunOptions, output_chars: int, pool: ThreadPoolExecutor,
                  enforced: dict[str, bool], transcripts: TranscriptWriter | None, number: int,
                  run: Callable[[Sandbox], Awaitable[AgentJobResult]]) -> AgentJobResult | Exception:
    """One attempt (``run``) in a fresh sandbox, judged there, its transcript written as attempt
    ``number``; the error when the sandbox cannot be made."""
    try:
        sandbox = await asyncio.get_running_loop().run_in_executor(
            pool, lambda: _new_sandbox(task, options, output_chars))
        if not enforced:
            enforced.update(_report(sandbox))
    except (OSError, ValueError) as e:
        return e
    try:
        result = await run(sandbox)
        result.job.task_name = task.name
        verdict = await _run_check(sandbox, task, pool)
        result.job.solved, result.job.verdict = verdict.solved, verdict.reason
    finally:
        sandbox.close()
    if transcripts is not None:
        await asyncio.get_running_loop().run_in_executor(pool, transcripts.write, result, number)
    return result


async def _run_check(sandbox: Sandbox, task: AgentTask, pool: ThreadPoolExecutor) -> Verdict:
    """The judge's verdict on the job's sandbox (``agent_engine.agent.judge``)."""
    verdict = await asyncio.get_running_loop().run_in_executor(pool, judge, sandbox, task)
    if verdict.solved is False:
        log.debug("task %r not solved: %s", task.name, verdict.reason)
    return verdict


async def _context_tokens(client: httpx.AsyncClient, model: str | None) -> int | None:
    """The served model's context length from ``GET /models`` (vLLM's and our ``max_model_len``; the
    card named ``model``, else every card the server lists), or None when the server does not say. A
    command's output is kept to that many characters: about a quarter of the context, so one verbose
    test run cannot fill a small model's window."""
    try:
        cards = (await client.get("/models")).json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    cards = [c for c in cards if isinstance(c, dict)]
    named = [c for c in cards if c.get("id") == model] or cards  # a known-name alias: the server's cards
    known = [n for n in (c.get("max_model_len") for c in named) if isinstance(n, int) and n > 0]
    return min(known) if known else None


def _new_sandbox(task: AgentTask, options: RunOptions, output_chars: int) -> Sandbox:
    """The job's sandbox: a confined copy of the task's repo, its check files read-only, command output
    kept to ``output_chars`` characters."""
    sandbox = Sandbox.create(task.repo, timeout=options.command_timeout, max_output_chars=output_chars,
                             isolation=options.isolation, allow_network=options.allow_network)
    try:
        protect(sandbox.workdir_path, check_paths(task))
    except BaseException:
        sandbox.close()
        raise
    return sandbox


def _report(sandbox: Sandbox) -> dict[str, bool]:
    """Log what the sandbox enforces (a warning naming what it does not); returns ``enforced()``."""
    enforced = sandbox.enforced()
    off = sorted(k for k, v in enforced.items() if not v)
    log.info("sandbox enforces: %s", ", ".join(sorted(k for k, v in enforced.items() if v)))
    if off:
        why = sandbox.confinement.namespace_error
        log.warning("sandbox does NOT enforce: %s%s", ", ".join(off), f" (namespaces: {why})" if why else "")
    return enforced


def _failed_job(task: AgentTask, job_id: str, now: float, error: Exception) -> AgentJobResult:
    job = AgentJobRecord(job_id, job_id, now, task=task.task, exit_status=type(error).__name__,
                         error=f"{type(error).__name__}: {error}", solved=False if task.check is not None else None,
                         task_name=task.name)
    return AgentJobResult([], job, [])


def run_agent_jobs_sync(tasks: list[AgentTask], options: RunOptions) -> AgentRunResult:
    """``run_agent_jobs`` from synchronous code (starts its own event loop)."""
    return asyncio.run(run_agent_jobs(tasks, options))
