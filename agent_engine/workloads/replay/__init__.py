"""Trace replay: plans (``plan``), the client that sends them as closed-loop agent jobs to an
OpenAI-compatible server (``client``), and the records it writes (``records``).

Light on purpose: httpx, numpy and tqdm only (no torch, no transformers).
"""

from agent_engine.workloads.replay.client import ReplayResult, replay, replay_sync
from agent_engine.workloads.replay.plan import JobPlan, ReplayOptions, TurnPlan, arrival_times, plan_job
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
    "arrival_times",
    "plan_job",
    "read_records",
    "replay",
    "replay_sync",
    "summarize",
    "write_records",
]
