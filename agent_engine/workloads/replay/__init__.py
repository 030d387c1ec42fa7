"""Trace replay client: agent jobs as closed loops against an OpenAI-compatible server, with records.

Light on purpose: httpx, numpy and tqdm only (no torch, no transformers).
"""

from agent_engine.workloads.replay.client import (
    JobPlan,
    ReplayOptions,
    ReplayResult,
    TurnPlan,
    plan_job,
    replay,
    replay_sync,
)
from agent_engine.workloads.replay.records import (
    JobRecord,
    TurnRecord,
    read_records,
    summarize,
    write_records,
)

__all__ = [
    "JobPlan",
    "JobRecord",
    "ReplayOptions",
    "ReplayResult",
    "TurnPlan",
    "TurnRecord",
    "plan_job",
    "read_records",
    "replay",
    "replay_sync",
    "summarize",
    "write_records",
]
