"""Per-turn and per-job records of a replay, their JSONL file, and summary statistics.

Times are seconds; ``*_at`` fields are measured from the replay's start (one monotonic clock).

Invariants:
- A ``TurnRecord`` with ``error is None`` has ``done_at >= sent_at`` and ``latency = done_at - sent_at``;
  ``ttft`` (streaming only) is ``<= latency``; ``queue_delay`` is the server's own figure when it
  sent one (``queue_source == "server"``), else the TTFT as an upper bound (``"ttft"``), else None.
- A ``JobRecord``'s ``jct = end_at - start_at``: first request sent to last response received; a job
  with ``error`` set did not finish and is left out of the JCT statistics.
- ``summarize`` is a pure function of the records; ``prefix_hit_ratio`` = sum of cached tokens /
  sum of prompt tokens over the turns that reported cached tokens (None when none did).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from agent_engine.json_types import JsonObject

__all__ = ["JobRecord", "TurnRecord", "read_records", "summarize", "write_records"]


@dataclass
class TurnRecord:
    """One request of a replayed job."""

    job_id: str
    turn: int
    sent_at: float
    done_at: float | None = None
    latency: float | None = None
    ttft: float | None = None
    queue_delay: float | None = None
    queue_source: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    max_tokens: int = 0
    cached_tokens: int | None = None
    is_last_step: bool = False
    tool_name: str | None = None
    tool_sleep: float = 0.0
    error: str | None = None

    def set_queue_delay(self, server: float | None, ttft: float | None) -> None:
        """The server's own queueing delay when it sent one, else the TTFT as an upper bound."""
        if server is not None:
            self.queue_delay, self.queue_source = server, "server"
        elif ttft is not None:
            self.queue_delay, self.queue_source = ttft, "ttft"


@dataclass
class JobRecord:
    """One replayed job."""

    job_id: str
    trace_job_id: str
    arrival_at: float
    start_at: float | None = None
    end_at: float | None = None
    jct: float | None = None
    turns: int = 0
    trace_turns: int = 0
    truncated: bool = False
    error: str | None = None


Record = TurnRecord | JobRecord


def write_records(path: str | os.PathLike[str], records: Iterable[Record]) -> int:
    """One JSON line per record, tagged ``"kind": "turn" | "job"``; returns the number written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as f:
        for r in records:
            kind = "turn" if isinstance(r, TurnRecord) else "job"
            f.write(json.dumps({"kind": kind, **asdict(r)}) + "\n")
            n += 1
    return n


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    """Inverse of ``write_records`` (unknown keys are ignored)."""
    out: list[Record] = []
    names = {cls: {f.name for f in fields(cls)} for cls in (TurnRecord, JobRecord)}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            cls = TurnRecord if d.get("kind") == "turn" else JobRecord
            out.append(cls(**{k: v for k, v in d.items() if k in names[cls]}))
    return out


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(xs, q)) if xs else None


def summarize(records: Iterable[Record]) -> JsonObject:
    """Summary of a replay: JCT mean/p50/p90/p99, jobs per minute, per-turn means, prefix-hit ratio."""
    turns: list[TurnRecord] = []
    jobs: list[JobRecord] = []
    for r in records:
        (turns if isinstance(r, TurnRecord) else jobs).append(r)
    done = [j for j in jobs if j.error is None and j.jct is not None]
    jcts = [float(j.jct) for j in done if j.jct is not None]
    ok_turns = [t for t in turns if t.error is None]
    span = None
    if done:
        span = max(float(j.end_at or 0.0) for j in done) - min(float(j.start_at or 0.0) for j in done)
    with_cache = [t for t in ok_turns if t.cached_tokens is not None]
    prompt_sum = sum(t.prompt_tokens for t in with_cache)
    return {
        "jobs": len(jobs),
        "jobs_completed": len(done),
        "jobs_failed": sum(1 for j in jobs if j.error is not None),
        "jobs_truncated": sum(1 for j in jobs if j.truncated),
        "turns": len(turns),
        "turns_failed": len(turns) - len(ok_turns),
        "duration_s": span,
        "jobs_per_minute": (60.0 * len(done) / span) if span else None,
        "jct_mean": _mean(jcts),
        "jct_p50": _pct(jcts, 50),
        "jct_p90": _pct(jcts, 90),
        "jct_p99": _pct(jcts, 99),
        "queue_delay_mean": _mean([t.queue_delay for t in ok_turns if t.queue_delay is not None]),
        "ttft_mean": _mean([t.ttft for t in ok_turns if t.ttft is not None]),
        "ttft_p90": _pct([t.ttft for t in ok_turns if t.ttft is not None], 90),
        "latency_mean": _mean([t.latency for t in ok_turns if t.latency is not None]),
        "prompt_tokens": sum(t.prompt_tokens for t in ok_turns),
        "output_tokens": sum(t.output_tokens for t in ok_turns),
        "cached_tokens": sum(t.cached_tokens or 0 for t in with_cache),
        "prefix_hit_ratio": (sum(t.cached_tokens or 0 for t in with_cache) / prompt_sum)
        if prompt_sum
        else None,
    }
