"""Read, write and validate the agent-trace JSONL format (one job a line).

A line is ``{"job_id": ..., <job metadata>..., "turns": [{<turn>}, ...]}``; a turn carries
``prompt_tokens``, ``output_tokens``, ``cached_tokens``, ``llm_seconds``, ``tool_name`` and
``tool_seconds`` (plus any extra keys, kept verbatim).

Invariants (checked by ``validate_job``):
- a job has at least one turn and a non-empty string ``job_id``;
- ``prompt_tokens >= 1`` and ``output_tokens >= 0`` are integers;
- ``prompt_tokens[i] >= prompt_tokens[i-1] + output_tokens[i-1]`` (each turn's prompt extends the last
  prompt and the last answer), so prompts never shrink;
- ``tool_seconds`` is a finite number on every turn but the last, and ``null`` on the last. It may be
  slightly negative in real traces (timestamp skew: 5 of the 11k turns the ``swe`` profile was fitted
  on, down to -1.1 s); consumers clamp it at 0 (``fit_profile`` and the replay client do).

Round trip: ``TraceJob.from_dict(d).to_dict() == d`` for any valid line (unknown keys are preserved;
known keys come in the format's canonical order, the order ``to_dict`` writes).

``read_jobs`` is the one reader of trace files; commands resolve a trace spec (default trace,
``synth:PROFILE`` or a path) with ``agent_engine.workloads.traces.source.load_trace``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_engine.json_types import JsonObject

__all__ = [
    "TraceFormatError",
    "TraceJob",
    "TraceTurn",
    "iter_jobs",
    "read_jobs",
    "validate_job",
    "write_jobs",
]

_TURN_KEYS = ("prompt_tokens", "output_tokens", "cached_tokens", "llm_seconds", "tool_name", "tool_seconds")


class TraceFormatError(ValueError):
    """A line of a trace file breaks the format or its invariants."""


@dataclass
class TraceTurn:
    """One model turn of an agent job and the tool call that follows it."""

    prompt_tokens: int
    output_tokens: int
    tool_name: str | None = None
    tool_seconds: float | None = None
    cached_tokens: int | None = None
    llm_seconds: float | None = None
    extra: JsonObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: JsonObject) -> TraceTurn:
        """Build from a JSON object; keys other than the known ones land in ``extra``."""
        try:
            return cls(
                prompt_tokens=d["prompt_tokens"],
                output_tokens=d["output_tokens"],
                tool_name=d.get("tool_name"),
                tool_seconds=d.get("tool_seconds"),
                cached_tokens=d.get("cached_tokens"),
                llm_seconds=d.get("llm_seconds"),
                extra={k: v for k, v in d.items() if k not in _TURN_KEYS},
            )
        except KeyError as e:
            raise TraceFormatError(f"turn lacks {e.args[0]!r}") from None

    def to_dict(self) -> JsonObject:
        """The JSON object (known keys first, then ``extra``)."""
        d: JsonObject = {
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }
        d.update({k: v for k, v in self.extra.items() if k == "reasoning_tokens"})
        d["llm_seconds"] = self.llm_seconds
        d["tool_name"] = self.tool_name
        d.update({k: v for k, v in self.extra.items() if k != "reasoning_tokens"})
        d["tool_seconds"] = self.tool_seconds
        return d


@dataclass
class TraceJob:
    """One agent job: its id, free-form metadata (source, model, run, ...) and its turns in order."""

    job_id: str
    turns: list[TraceTurn]
    meta: JsonObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: JsonObject) -> TraceJob:
        """Build from one JSON line's object (not validated; see ``validate_job``)."""
        if "job_id" not in d or not isinstance(d.get("turns"), list):
            raise TraceFormatError("a job needs 'job_id' and a list 'turns'")
        return cls(
            job_id=d["job_id"],
            turns=[TraceTurn.from_dict(t) for t in d["turns"]],
            meta={k: v for k, v in d.items() if k not in ("job_id", "turns")},
        )

    def to_dict(self) -> JsonObject:
        """The JSON object of one line."""
        return {"job_id": self.job_id, **self.meta, "turns": [t.to_dict() for t in self.turns]}


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def validate_job(job: TraceJob) -> list[str]:
    """All invariant violations of ``job`` as messages (empty list: valid)."""
    errs: list[str] = []
    if not isinstance(job.job_id, str) or not job.job_id:
        errs.append("job_id must be a non-empty string")
    if not job.turns:
        errs.append("a job needs at least one turn")
    last = len(job.turns) - 1
    for i, t in enumerate(job.turns):
        if not _is_int(t.prompt_tokens) or t.prompt_tokens < 1:
            errs.append(f"turn {i}: prompt_tokens must be an int >= 1, got {t.prompt_tokens!r}")
            continue
        if not _is_int(t.output_tokens) or t.output_tokens < 0:
            errs.append(f"turn {i}: output_tokens must be an int >= 0, got {t.output_tokens!r}")
            continue
        if i > 0:
            prev = job.turns[i - 1]
            if _is_int(prev.prompt_tokens) and _is_int(prev.output_tokens):
                need = prev.prompt_tokens + prev.output_tokens
                if t.prompt_tokens < need:
                    errs.append(f"turn {i}: prompt_tokens {t.prompt_tokens} < previous prompt+output {need}")
        if t.tool_name is not None and not isinstance(t.tool_name, str):
            errs.append(f"turn {i}: tool_name must be a string or null")
        if i == last:
            if t.tool_seconds is not None:
                errs.append(f"turn {i}: tool_seconds must be null after the last turn")
        else:
            s = t.tool_seconds
            if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s):
                errs.append(f"turn {i}: tool_seconds must be a finite number, got {s!r}")
    return errs


def iter_jobs(path: str | os.PathLike[str], validate: bool = True) -> Iterator[TraceJob]:
    """Jobs of a JSONL trace in file order (blank lines skipped); raises TraceFormatError on a bad line."""
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                job = TraceJob.from_dict(json.loads(line))
            except (json.JSONDecodeError, TraceFormatError) as e:
                raise TraceFormatError(f"{path}:{lineno}: {e}") from None
            if validate:
                errs = validate_job(job)
                if errs:
                    raise TraceFormatError(f"{path}:{lineno} ({job.job_id}): {'; '.join(errs[:3])}")
            yield job


def read_jobs(path: str | os.PathLike[str], validate: bool = True) -> list[TraceJob]:
    """All jobs of a JSONL trace (see ``iter_jobs``)."""
    return list(iter_jobs(path, validate=validate))


def write_jobs(path: str | os.PathLike[str], jobs: Iterable[TraceJob]) -> int:
    """Write one JSON line per job (parent folders created); returns the number of jobs written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as f:
        for job in jobs:
            f.write(json.dumps(job.to_dict(), separators=(", ", ": ")) + "\n")
            n += 1
    return n
