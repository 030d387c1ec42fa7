"""Where a trace comes from: the one resolver every command, benchmark and the simulator use.

A trace spec is one of:
- ``None`` or ``"default"``: the agent trace shipped with the package (``DEFAULT_TRACE``), jobs
  synthesized from the ``swe`` profile, whose distributions were fitted to real mini-swe-agent runs;
  numbers and tool names only, no third-party text;
- ``"live"``: the turns of this project's own agent on its 23 shipped tasks with Qwen2.5-Coder-0.5B
  from its file (``LIVE_TRACE``: token counts and measured tool seconds, recorded with
  ``agent-engine agent --tasks builtin --step-limit 8 --save-trace``; no task text);
- ``"synth:PROFILE"``: jobs drawn from a built-in profile (``swe``, ``bfcl``) or a profile JSON path;
- a path to a trace JSONL file (a real trace, passed with ``--trace``).

Invariants: resolution never looks outside the package or the given path; a missing file or an
unknown profile raises ``ValueError`` naming it, never a silent fallback to another trace.
"""

from __future__ import annotations

from pathlib import Path

from agent_engine.workloads.traces.format import TraceJob, read_jobs
from agent_engine.workloads.traces.profile import load_profile
from agent_engine.workloads.traces.synth import synthesize

__all__ = ["DEFAULT_TRACE", "DEFAULT_TRACE_JOBS", "DEFAULT_TRACE_SEED", "LIVE_TRACE", "load_trace", "trace_label"]

DEFAULT_TRACE = Path(__file__).resolve().parent / "data" / "default_trace.jsonl"
# How the shipped trace was made: ``agent-engine trace synth --profile swe --jobs 128 --seed 7``.
DEFAULT_TRACE_JOBS = 128
DEFAULT_TRACE_SEED = 7
SYNTH_PREFIX = "synth:"
LIVE_TRACE = Path(__file__).resolve().parent / "data" / "live_agent_trace.jsonl"


def load_trace(spec: str | None = None, max_jobs: int | None = None, seed: int = 0) -> list[TraceJob]:
    """The jobs of the trace ``spec`` names (see the module docstring), at most ``max_jobs`` of them.

    ``seed`` matters only for ``synth:`` specs; ``max_jobs`` of a synthesized trace draws just that many.
    """
    if spec and spec.startswith(SYNTH_PREFIX):
        try:
            profile = load_profile(spec[len(SYNTH_PREFIX):] or "swe")
        except FileNotFoundError as e:
            raise ValueError(f"trace {spec!r}: {e}") from None
        return synthesize(profile, max_jobs if max_jobs is not None else DEFAULT_TRACE_JOBS, seed=seed)
    path = DEFAULT_TRACE if spec in (None, "", "default") else LIVE_TRACE if spec == "live" else Path(spec)
    if not path.is_file():
        raise ValueError(f"trace file not found: {path}")
    jobs = read_jobs(path)
    return jobs if max_jobs is None else jobs[:max_jobs]


def trace_label(spec: str | None) -> str:
    """What to print and record as the trace a run used."""
    if spec in (None, "", "default"):
        return f"default ({DEFAULT_TRACE.name})"
    if spec == "live":
        return f"live ({LIVE_TRACE.name})"
    return spec
