"""Builders shared by the scheduler tests (pure Python, no torch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler import (
    FakeClock,
    FakeRunner,
    JobHints,
    JobListener,
    Request,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
)
from scheduler.job_record import JobEstimate, JobRecord, PendingTurn


@dataclass
class StubEstimator(JobListener):
    """The estimator's part of the job stream, for scheduler tests: each ended turn's pin TTL is
    ``ttl(request)`` (asked for non-final turns only), written on the job's record before the policy
    reads it; with ``returns``, a job between turns has an estimate whose expected return is
    ``returns(job_id, tenant)`` (what the prefetcher reads)."""

    ttl: Callable[[Request], float] = lambda request: 0.0
    returns: Callable[[str, str | None], float | None] | None = None

    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        if record.estimate is not None:
            record.estimate.pending = None

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        if request.is_last_step:
            record.estimate = None
            return
        record.ttl = self.ttl(request)
        if self.returns is not None:
            record.estimate = record.estimate or JobEstimate(forecast=_Forecast(record, self.returns))
            record.estimate.pending = PendingTurn(request.tool_name, now)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        record.estimate = None


@dataclass
class _Forecast:
    record: JobRecord
    returns: Callable[[str, str | None], float | None]

    def expected_return(self, turn: PendingTurn, now: float) -> float:
        answer = self.returns(self.record.job_id, self.record.tenant)
        return float("inf") if answer is None else answer


@dataclass
class EndedJobs(JobListener):
    """Notes ``(job_id, turns, jct)`` of each job an event ended, as the estimator wrote it on the record
    (``JobRecord.completion``): a listener registered after the estimator, as the server's metrics are."""

    ended: list[tuple[str, int, float]]

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self._note(record)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        self._note(record)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self._note(record)

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        self._note(record)

    def _note(self, record: JobRecord) -> None:
        if record.completion is not None:
            self.ended.append((record.job_id, record.completion.turns, record.completion.jct))


def pinning(ttl: float | Callable[[Request], float]) -> StubEstimator:
    """A ``StubEstimator`` pinning every non-final turn for ``ttl`` seconds (or ``ttl(request)``)."""
    return StubEstimator(ttl if callable(ttl) else (lambda request: ttl))


def make_request(
    rid: str,
    prompt: list[int],
    max_tokens: int = 4,
    *,
    block_size: int = 4,
    t: float = 0.0,
    job_arrival_time: float | None = None,
    **hints,
) -> Request:
    """A greedy request; ``hints`` are ``JobHints`` fields (``job_id``, ``tenant``, ``priority``, ...)."""
    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    return Request(rid, prompt, sp, block_size=block_size, arrival_time=t, job_arrival_time=job_arrival_time,
                   hints=JobHints.for_job(hints.pop("job_id", None), **hints))


def make_scheduler(
    num_blocks: int = 17, block_size: int = 4, clock: FakeClock | None = None,
    estimator: JobListener | None = None, **kw
) -> Scheduler:
    kw.setdefault("max_model_len", min(64, (num_blocks - 1) * block_size))
    cfg = SchedulerConfig(num_blocks=num_blocks, block_size=block_size, **kw)
    return Scheduler(cfg, clock=clock or FakeClock(), estimator=estimator)


def run_step(s: Scheduler, runner: FakeRunner):
    out = s.schedule()
    res = runner.execute(out)
    return out, s.update(out, res)


def run_to_completion(s: Scheduler, runner: FakeRunner, max_steps: int = 10_000) -> int:
    steps = 0
    while s.has_unfinished_requests():
        run_step(s, runner)
        steps += 1
        assert steps < max_steps, "scheduler made no progress"
    return steps
