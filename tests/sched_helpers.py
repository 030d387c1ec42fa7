"""Builders shared by the scheduler tests (pure Python, no torch)."""

from __future__ import annotations

from scheduler import (
    FakeClock,
    FakeRunner,
    JobHints,
    Request,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
)


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
    num_blocks: int = 17, block_size: int = 4, clock: FakeClock | None = None, **kw
) -> Scheduler:
    kw.setdefault("max_model_len", min(64, (num_blocks - 1) * block_size))
    cfg = SchedulerConfig(num_blocks=num_blocks, block_size=block_size, **kw)
    return Scheduler(cfg, clock=clock or FakeClock())


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
