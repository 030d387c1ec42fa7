"""A simulated job's turns, shared by the single-engine and the cluster simulation.

A job follows its replay plan (``agent_engine.workloads.replay.plan``): each turn's prompt is the
previous turn's whole context plus fresh tokens up to the planned length (so prefix sharing is real),
``max_tokens`` with ``ignore_eos``, and after each non-final turn a tool wait of the trace's
``tool_seconds``. Where the turn runs (one scheduler, or the replica a router picks) is the caller's.

Invariants: a job's ``start_at`` is its first turn's send time; ``finish_turn`` records a job's JCT
(last finish minus ``start_at``) exactly once, when its final turn finishes; a request's inherited
block hashes equal the ones it would compute from its tokens (they are a pure function of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_engine.sim.result import SimResult
from agent_engine.workloads.replay.plan import JobPlan, ReplayOptions, job_header, plan_job
from agent_engine.workloads.traces.format import TraceJob
from scheduler import JobHints, Request, SamplingParams

__all__ = ["OUT_TOKEN", "SimJob", "SimRequest", "finish_turn", "plan_jobs", "turn_context", "turn_request"]

FILL_TOKEN = 100  # the "fresh" tokens standing for tool output (the job header keeps chains unique)
OUT_TOKEN = 7  # every sampled token


class SimRequest(Request):
    """A ``Request`` that starts from the previous turn's block hashes (its tokens are a prefix).

    The chained hashes are a pure function of the tokens, so inheriting them is exact; it spares
    re-hashing a whole growing context every turn.
    """

    def __init__(self, *args: Any, inherited_hashes: Sequence[int] = (), **kwargs: Any) -> None:
        self._inherited = inherited_hashes
        super().__init__(*args, **kwargs)

    def _extend_block_hashes(self) -> None:
        if self._inherited:
            self.block_hashes = list(self._inherited)
            self._inherited = ()
        super()._extend_block_hashes()


@dataclass
class SimJob:
    """A job's progress: its plan, the next turn to send, its last finished request, its first send, and
    (the cluster simulation's) its finished turns as ``(prompt, output, cached)`` tokens, in order."""

    index: int
    plan: JobPlan
    next_turn: int = 0
    last_req: SimRequest | None = None
    start_at: float = 0.0
    turns: list[tuple[int, int, int]] = field(default_factory=list)


def plan_jobs(jobs: Sequence[TraceJob], opts: ReplayOptions) -> list[SimJob]:
    """The first ``opts.max_jobs`` jobs (all when None), each with its replay plan."""
    picked = list(jobs)[: opts.max_jobs] if opts.max_jobs is not None else list(jobs)
    return [SimJob(i, plan_job(j, i, opts)) for i, j in enumerate(picked)]


def turn_context(job: SimJob, t: float, opts: ReplayOptions) -> tuple[list[int], Sequence[int]]:
    """The next turn's prompt and the block hashes it inherits; a first turn starts the job at ``t``."""
    tp = job.plan.turns[job.next_turn]
    prev = job.last_req
    if prev is None:
        job.start_at = t
        return (job_header(job.index, opts) + [FILL_TOKEN] * tp.prompt_len)[: tp.prompt_len], ()
    return prev.all_token_ids + [FILL_TOKEN] * (tp.prompt_len - prev.num_tokens), prev.block_hashes


def turn_request(job: SimJob, prompt: list[int], hashes: Sequence[int], t: float, block_size: int) -> SimRequest:
    """The request of the job's next turn, sent at ``t`` with the job's hints (its program-order key is
    stamped from the job's record when the scheduler's job table publishes its arrival)."""
    tp = job.plan.turns[job.next_turn]
    return SimRequest(
        f"{job.plan.job_id}-{job.next_turn}", prompt,
        SamplingParams(temperature=0.0, max_tokens=tp.max_tokens, ignore_eos=True),
        block_size=block_size, arrival_time=t,
        hints=JobHints.for_job(job.plan.job_id, is_last_step=tp.is_last_step, tool_name=tp.tool_name),
        inherited_hashes=hashes,
    )


def finish_turn(res: SimResult, job: SimJob, req: SimRequest, now: float) -> float | None:
    """Account a finished turn in ``res`` and move the job on: the tool wait before its next turn, or
    None when the job is over (its JCT is recorded; the caller releases it)."""
    res.prompt_tokens += req.num_prompt_tokens
    res.cached_tokens += max(0, req.num_cached_tokens)
    res.output_tokens += req.num_output_tokens
    if req.first_scheduled_time is not None:
        res.queue_delays.append(req.first_scheduled_time - req.arrival_time)
    tp = job.plan.turns[job.next_turn]
    job.next_turn += 1
    job.last_req = req
    if tp.is_last_step or job.next_turn >= len(job.plan.turns):
        res.jcts.append(now - job.start_at)
        res.job_spans.append((job.start_at, now))
        job.last_req = None
        return None
    return tp.sleep_s
