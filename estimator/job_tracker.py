"""Per-job state: when a job first arrived, how many turns it sent, its pending turn and its durations.

This is the one job tracker of the project: the engine asks the ``Estimator`` for a job's first
arrival and turn count instead of keeping its own table.

Invariants:
- A job holds at most one pending (finished, not yet returned) turn.
- ``first_arrival`` is None until the job's first ``turn_arrived``; from then on it never changes,
  and ``turns`` counts the calls to ``turn_arrived`` (so ``turns >= 1`` exactly when it is set).
- At most ``max_jobs`` jobs are kept; the least recently touched one is forgotten first, and
  ``active`` always equals the number of kept jobs whose ``first_arrival`` is set.
- A job keeps at most ``max_durations_per_job`` measured durations, each >= 0, oldest first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["JobState", "JobTracker", "PendingTurn"]


@dataclass
class PendingTurn:
    """A finished non-final turn whose job has not come back yet."""

    tool_name: str | None
    finish_time: float
    turn_index: int = 0
    context_tokens: int = 0
    command: str | None = None


@dataclass
class JobState:
    """What is known about one job while it runs."""

    pending: PendingTurn | None = None
    durations: list[float] = field(default_factory=list)  # this job's measured durations, oldest first
    first_arrival: float | None = None  # clock time of the job's first turn (program-level FCFS key)
    turns: int = 0  # turns of this job that arrived so far


class JobTracker:
    """Per-job bookkeeping, LRU-bounded: jobs that never end are forgotten, least recently touched first."""

    def __init__(self, max_jobs: int = 100_000, max_durations_per_job: int = 64) -> None:
        self._jobs: OrderedDict[str, JobState] = OrderedDict()
        self.max_jobs = max_jobs
        self.max_durations_per_job = max_durations_per_job
        self.active = 0  # kept jobs whose first turn arrived

    def __len__(self) -> int:
        return len(self._jobs)

    def state(self, job_id: str) -> JobState:
        """The job's state, created if new; marks the job most recently used (may evict the oldest)."""
        st = self._jobs.get(job_id)
        if st is None:
            st = self._jobs[job_id] = JobState()
            while len(self._jobs) > self.max_jobs:
                self._dropped(self._jobs.popitem(last=False)[1])
        else:
            self._jobs.move_to_end(job_id)
        return st

    def peek(self, job_id: str) -> JobState | None:
        """The job's state without creating it or touching the LRU order."""
        return self._jobs.get(job_id)

    def turn_arrived(self, job_id: str, now: float) -> float:
        """Count one arriving turn of the job; returns its first arrival (``now`` for its first turn)."""
        st = self.state(job_id)
        if st.first_arrival is None:
            st.first_arrival = now
            self.active += 1
        st.turns += 1
        return st.first_arrival

    def finish_turn(self, job_id: str, turn: PendingTurn) -> None:
        """The job's turn finished and its tool runs now (replaces any earlier pending turn)."""
        self.state(job_id).pending = turn

    def arrive(self, job_id: str, arrival_time: float) -> tuple[PendingTurn, float] | None:
        """Close the job's pending turn; returns it with the measured duration (>= 0), or None."""
        st = self._jobs.get(job_id)
        if st is None or st.pending is None:
            return None
        turn, st.pending = st.pending, None
        seconds = max(0.0, arrival_time - turn.finish_time)
        st.durations.append(seconds)
        if len(st.durations) > self.max_durations_per_job:
            del st.durations[0]
        return turn, seconds

    def forget(self, job_id: str) -> JobState | None:
        """End the job: drop its state and return it (None if it was not tracked)."""
        st = self._jobs.pop(job_id, None)
        if st is not None:
            self._dropped(st)
        return st

    def pending(self) -> dict[str, PendingTurn]:
        """Every job's pending turn, by job id."""
        return {j: st.pending for j, st in self._jobs.items() if st.pending is not None}

    def _dropped(self, st: JobState) -> None:
        if st.first_arrival is not None:
            self.active -= 1
