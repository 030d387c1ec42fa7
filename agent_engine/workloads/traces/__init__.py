"""Agent traces: the JSONL job format, fitted workload profiles and a synthetic job generator.

Light on purpose: numpy only (no torch, no transformers).
"""

from agent_engine.workloads.traces.dist import Dist
from agent_engine.workloads.traces.format import (
    TraceFormatError,
    TraceJob,
    TraceTurn,
    read_jobs,
    validate_job,
    write_jobs,
)
from agent_engine.workloads.traces.profile import Profile, fit_profile, load_profile, save_profile
from agent_engine.workloads.traces.source import DEFAULT_TRACE, load_trace, trace_label
from agent_engine.workloads.traces.synth import synthesize, synthesize_job

__all__ = [
    "DEFAULT_TRACE",
    "Dist",
    "Profile",
    "TraceFormatError",
    "TraceJob",
    "TraceTurn",
    "fit_profile",
    "load_profile",
    "load_trace",
    "read_jobs",
    "save_profile",
    "synthesize",
    "synthesize_job",
    "trace_label",
    "validate_job",
    "write_jobs",
]
