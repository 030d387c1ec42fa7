"""What a replay sends, decided up front: per job its turns' prompt lengths, ``max_tokens``, hints and
tool sleeps, and the jobs' arrival times. Pure functions of the trace and ``ReplayOptions``; the
replay client (``agent_engine.workloads.replay.client``) and the simulator both follow these plans.

Invariants:
- Turn 0's target length is ``max(1, round(prompt_tokens * token_scale))``; a later turn's is at least
  the previous turn's length plus its ``max_tokens`` (the engine generates exactly ``max_tokens``
  with ``ignore_eos``), so every prompt extends the previous prompt and answer.
- With ``max_model_len`` a job keeps the longest prefix of turns whose ``prompt + max_tokens`` fit
  (turn 0 is cut down to fit), and its last kept turn carries ``is_last_step``. Exactly one turn of a
  plan has ``is_last_step``, and its sleep is 0; negative trace gaps sleep 0.
- Token ids are in ``[min_token_id, vocab_size)``; ``job_header(index)`` is ``HEADER_LEN`` ids that
  differ for every job index below ``(vocab_size - min_token_id) ** HEADER_LEN``.
- ``arrival_times`` is deterministic under ``seed``: Poisson with rate ``jps`` from t=0, else all 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agent_engine.json_types import JsonObject
from agent_engine.workloads.hint_styles import HINT_STYLES
from agent_engine.workloads.traces.format import TraceJob

__all__ = ["HEADER_LEN", "JobPlan", "ReplayOptions", "TurnPlan", "arrival_times", "job_header", "plan_job"]

HEADER_LEN = 2  # the job index in base (vocab_size - min_token_id): unique prefixes for 15M jobs


@dataclass(frozen=True)
class ReplayOptions:
    """Knobs of a replay (see the client's module docstring); ``None`` means unlimited / not used."""

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
    extra_body: JsonObject = field(default_factory=dict)
    hints: str = "job_id"  # how the job is told to the server: a style of ``workloads.hint_styles``

    def __post_init__(self) -> None:
        if self.hints not in HINT_STYLES:
            raise ValueError(f"unknown hints style {self.hints!r}; known: {', '.join(HINT_STYLES)}")
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

    @property
    def id_prefix(self) -> str:
        """The prefix of replayed job ids (``job_id_prefix``, default ``replay{seed}-``)."""
        return self.job_id_prefix if self.job_id_prefix is not None else f"replay{self.seed}-"


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


def _sizes(job: TraceJob, options: ReplayOptions) -> tuple[list[tuple[int, int]], bool]:
    """``(prompt length, max_tokens)`` of every turn that fits, and whether turns were dropped."""
    s, limit = options.token_scale, options.max_model_len
    src = job.turns[: options.max_turns] if options.max_turns else job.turns
    truncated = len(src) < len(job.turns)
    sizes: list[tuple[int, int]] = []
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
        sizes.append((length, max_tokens))
        prev_len, prev_out = length, max_tokens
    return sizes, truncated


def plan_job(job: TraceJob, index: int, options: ReplayOptions) -> JobPlan:
    """The turns to send for ``job`` (pure; see the module invariants)."""
    sizes, truncated = _sizes(job, options)
    n = len(sizes)
    plans = []
    for i, (length, max_tokens) in enumerate(sizes):
        turn = job.turns[i]
        gap = turn.tool_seconds
        sleep = 0.0 if i == n - 1 or gap is None else max(0.0, float(gap)) * options.time_scale
        plans.append(TurnPlan(i, length, max_tokens, i == n - 1, turn.tool_name, sleep))
    job_id = f"{options.id_prefix}{index:05d}"
    return JobPlan(index, job_id, job.job_id, tuple(plans), len(job.turns), truncated)


def arrival_times(n: int, options: ReplayOptions) -> list[float]:
    """Job arrival offsets (seconds): Poisson with rate ``jps`` starting at 0, else all 0."""
    if n == 0:
        return []
    if options.jps is None:
        return [0.0] * n
    gaps = np.random.default_rng([options.seed, 1 << 30]).exponential(1.0 / options.jps, n)
    gaps[0] = 0.0
    return np.cumsum(gaps).tolist()


def job_header(index: int, options: ReplayOptions) -> list[int]:
    """The ``HEADER_LEN`` token ids that open job ``index``'s first prompt (unique per job)."""
    base = options.vocab_size - options.min_token_id
    return [options.min_token_id + (index // base**k) % base for k in range(HEADER_LEN)]
