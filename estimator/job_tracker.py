"""The estimator's per-job state: when a job first arrived, how many turns it sent, its pending turn and
its durations, kept on the job's record (``JobRecord.estimate``) in a ``JobTable``.

The estimator keeps no table of its own: standalone it makes a ``JobTable``, and in the engine and the
simulator it shares the scheduler's (``Estimator.keep_jobs_in``), so a job has one record whoever asks
about it: the policy reads the job's first arrival there, the prefetcher its expected return
(``JobEstimate.expected_return``, answered by the estimator that keeps the estimate).

Invariants:
- A job holds at most one pending (finished, not yet returned) turn.
- ``first_arrival`` is None until the job's first ``turn_arrived``; from then on it never changes,
  and ``turns`` counts the calls to ``turn_arrived`` (so ``turns >= 1`` exactly when it is set).
- A tracker sees only the records it keeps (``_kept``, least recently touched first): several trackers
  (one per tenant's estimator) share one table without reading each other's jobs. At most
  ``max_jobs`` are kept; the least recently touched one is forgotten first (its ``estimate`` dropped),
  and ``active`` always equals the number of kept jobs whose ``first_arrival`` is set.
- A job keeps at most ``max_durations_per_job`` measured durations, each >= 0, oldest first.
"""

from __future__ import annotations

from collections import OrderedDict

from scheduler.job_record import JobEstimate, JobRecord, PendingTurn, ReturnForecast
from scheduler.job_table import MAX_JOBS, JobTable

__all__ = ["JobEstimate", "JobTracker", "PendingTurn"]


class JobTracker:
    """Per-job bookkeeping, LRU-bounded: jobs that never end are forgotten, least recently touched first."""

    def __init__(self, max_jobs: int = MAX_JOBS, max_durations_per_job: int = 64,
                 table: JobTable | None = None, forecast: ReturnForecast | None = None) -> None:
        self.table = table if table is not None else JobTable()
        self.forecast = forecast  # given to each estimate: whoever reads the record can ask it
        self._kept: OrderedDict[JobRecord, None] = OrderedDict()  # an index of records (see the invariants)
        self.max_jobs = max_jobs
        self.max_durations_per_job = max_durations_per_job
        self.active = 0  # kept jobs whose first turn arrived

    def __len__(self) -> int:
        return len(self._kept)

    def state(self, job_id: str) -> JobEstimate:
        """The job's state, created if new; marks the job most recently used (may evict the oldest)."""
        record = self.table.record(job_id)
        if record in self._kept and record.estimate is not None:
            self._kept.move_to_end(record)
            return record.estimate
        estimate = record.estimate = JobEstimate(forecast=self.forecast)
        self._kept[record] = None
        while len(self._kept) > self.max_jobs:
            self._drop(self._kept.popitem(last=False)[0])
        return estimate

    def peek(self, job_id: str) -> JobEstimate | None:
        """The job's state without creating it or touching the LRU order."""
        record = self.table.get(job_id)
        return record.estimate if record is not None and record in self._kept else None

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
        st = self.peek(job_id)
        if st is None or st.pending is None:
            return None
        turn, st.pending = st.pending, None
        seconds = max(0.0, arrival_time - turn.finish_time)
        st.durations.append(seconds)
        if len(st.durations) > self.max_durations_per_job:
            del st.durations[0]
        return turn, seconds

    def forget(self, job_id: str) -> JobEstimate | None:
        """End the job: drop its state and return it (None if it was not tracked)."""
        record = self.table.get(job_id)
        if record is None or record not in self._kept:
            return None
        del self._kept[record]
        return self._drop(record)

    def pending(self) -> dict[str, PendingTurn]:
        """Every job's pending turn, by job id."""
        return {r.job_id: r.estimate.pending for r in self._kept
                if r.estimate is not None and r.estimate.pending is not None}

    def _drop(self, record: JobRecord) -> JobEstimate | None:
        """Take the estimate off a record this tracker no longer keeps."""
        estimate, record.estimate = record.estimate, None
        if estimate is not None and estimate.first_arrival is not None:
            self.active -= 1
        return estimate
