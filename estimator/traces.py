"""Read the agent-trace JSONL (one job a line, see shared/traces/README.md) into turns.

Invariants:
- Turns keep their job order; ``turn_index`` counts from 0 and ``num_turns`` is the job's length.
- Tool names pass through ``normalize_tool_name``, so they match what ``parse_tool`` returns.
- ``tool_seconds`` is None exactly for turns with no measured tool (the last turn of a job).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from estimator.tool_parser import normalize_tool_name

__all__ = ["TraceTurn", "default_trace_path", "read_trace"]

DEFAULT_TRACE = "mini_swe_agent_deepseek.jsonl"


@dataclass(frozen=True)
class TraceTurn:
    job_id: str
    turn_index: int
    num_turns: int
    tool_name: str | None
    prompt_tokens: int
    output_tokens: int
    tool_seconds: float | None


def read_trace(path: str | os.PathLike[str]) -> list[TraceTurn]:
    """All turns of all jobs in the file, job by job."""
    return list(iter_trace(path))


def iter_trace(path: str | os.PathLike[str]) -> Iterator[TraceTurn]:
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f):
            if not line.strip():
                continue
            job = json.loads(line)
            turns = job.get("turns") or []
            job_id = str(job.get("job_id", f"job-{line_no}"))
            for i, t in enumerate(turns):
                name = t.get("tool_name")
                secs = t.get("tool_seconds")
                yield TraceTurn(
                    job_id=job_id,
                    turn_index=i,
                    num_turns=len(turns),
                    tool_name=normalize_tool_name(name) if name else None,
                    prompt_tokens=int(t.get("prompt_tokens") or 0),
                    output_tokens=int(t.get("output_tokens") or 0),
                    tool_seconds=None if secs is None else float(secs),
                )


def default_trace_path(name: str = DEFAULT_TRACE) -> Path | None:
    """``$AGENT_ENGINE_TRACES`` (a file or a folder) or ``<repo>/../shared/traces/<name>``; None if absent."""
    env = os.environ.get("AGENT_ENGINE_TRACES")
    candidates = []
    if env:
        p = Path(env)
        candidates.append(p if p.is_file() else p / name)
    repo_root = Path(__file__).resolve().parent.parent
    candidates.append(repo_root.parent / "shared" / "traces" / name)
    for c in candidates:
        if c.is_file():
            return c
    return None
