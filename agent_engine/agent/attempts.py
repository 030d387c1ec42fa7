"""Attempts that share one prefix: test-time scaling for one agent job, as SWE-bench agents do it.

A job runs its first attempt as usual (greedy by default). When the task's check does not pass
afterwards, the next attempt branches from the first one's localization: its conversation up to the
first call that changed the repository (the task, the repository map, the views, searches and check
runs that found the code), in a fresh copy of the repository (which is what those calls left, since
none changed it), sampled with its own seed and temperature. The job's answer is the first attempt
whose check passes; the rest are not run.

Invariants:
- ``AttemptPolicy.config_for(base, 0)`` is ``base``; attempt ``k >= 1`` samples at
  ``temperature`` (never below the base's) with the seed ``base.seed + k * SEED_STRIDE``, so no two
  attempts share a seed and a job's attempts are reproducible on a server that honours seeds.
- ``branch_prefix(result)`` is the first attempt's messages before its ``branch_at`` (at least the
  task's opening messages), or the whole conversation when it changed nothing.
- The attempts are one job to the server: the same job id; only the last attempt that runs may say
  ``is_last_step``, and the job is released once, after it (``run_agent_job(final=...)``), so
  CONTINUUM keeps pinned what the next attempt reuses.
- ``merged(results, chosen)`` is the job as a whole: the chosen attempt's record (its exit status,
  submission, verdict) with ``attempts`` set, every attempt's turns in order, steps, format errors,
  repeats and refusals summed, and a JCT from the first attempt's start to the chosen one's end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agent_engine.agent.loop import AgentConfig, AgentJobResult

__all__ = ["DEFAULT_ATTEMPT_TEMPERATURE", "SEED_STRIDE", "AttemptPolicy", "attempt_policy", "branch_prefix",
           "merged"]

SEED_STRIDE = 1000  # attempt k's seeds start here times k above the base seed (a job makes far fewer calls)
DEFAULT_ATTEMPT_TEMPERATURE = 0.7
OPENING_MESSAGES = 2  # system prompt and task: every branch keeps at least these


@dataclass(frozen=True)
class AttemptPolicy:
    """How many attempts a job may make (1: no branching) and how attempts after the first sample."""

    attempts: int = 1
    temperature: float = DEFAULT_ATTEMPT_TEMPERATURE

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if self.temperature < 0:
            raise ValueError(f"attempt temperature must be >= 0, got {self.temperature}")

    def config_for(self, base: AgentConfig, k: int) -> AgentConfig:
        """The agent settings of attempt ``k`` (0-based; see the module docstring)."""
        if k == 0:
            return base
        return replace(base, temperature=max(base.temperature, self.temperature), seed=base.seed + k * SEED_STRIDE)


def attempt_policy(attempts: int, temperature: float | None) -> AttemptPolicy:
    """The policy the command-line flags ask for (``temperature`` None: the default)."""
    return AttemptPolicy(attempts, DEFAULT_ATTEMPT_TEMPERATURE if temperature is None else temperature)


def branch_prefix(result: AgentJobResult) -> list[dict[str, Any]]:
    """The conversation the next attempt continues (see the module docstring)."""
    at = result.job.branch_at
    cut = len(result.messages) if at is None else max(at, OPENING_MESSAGES)
    return [dict(m) for m in result.messages[:cut]]


def merged(results: list[AgentJobResult], chosen: int) -> AgentJobResult:
    """One job's result from its attempts (see the module docstring)."""
    if not results or not 0 <= chosen < len(results):
        raise ValueError(f"chosen attempt {chosen} out of {len(results)}")
    pick = results[chosen]
    job = replace(pick.job, attempts=len(results), start_at=results[0].job.start_at,
                  arrival_at=results[0].job.arrival_at)
    for attr in ("steps", "turns", "format_errors", "repeats", "elided", "refused", "cut_answers"):
        setattr(job, attr, sum(getattr(r.job, attr) for r in results))
    if job.error is None and job.start_at is not None and pick.job.end_at is not None:
        job.jct = pick.job.end_at - job.start_at
    turns = [t for r in results for t in r.turns]
    job.trace_turns = len(turns)
    return AgentJobResult(turns, job, pick.messages)
