"""The job table: one record per agent job, and the one place a job's events are published.

The scheduler owns one ``JobTable``. Its ``JobRecord``s (``scheduler.job_record``) hold every per-job
fact; the components that care about jobs register as ``JobListener``s and are told of each event once,
by the table, instead of being called one by one by whoever saw the event:

- ``arrive``: a turn of the job was added (``Scheduler.add_request``);
- ``end_turn``: a turn finished, not aborted (``Scheduler._finish``); ``request.is_last_step`` says
  it was the job's final turn, which ends the record;
- ``release``: the client said the job is over (``Scheduler.release_job``); an unknown job is a no-op;
- ``forget``: the table's bound dropped a record that held nothing (the oldest activity first).

Listeners are told in registration order: the scheduler registers the policy, then the second KV tier,
then the prefetcher; the engine registers its estimator hooks after them. Before telling them, the
table updates the record itself (``last_active``, ``ended``, the tenant and hint source), so a
listener reads the record as of the event.

Invariants:
- Each event reaches each listener exactly once. A listener that raises does not keep the others from
  being told: every listener is told, then the first exception is raised again (later ones are logged).
- Events are per turn, never per token: nothing here runs on the step's hot path.
- At most ``max_jobs`` records are kept beyond those that hold something: past it, the least recently
  active records that hold nothing are dropped (each with ``on_job_drop``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Protocol

from scheduler.job_record import JobRecord

if TYPE_CHECKING:
    from scheduler.request import Request

__all__ = ["MAX_JOBS", "JobListener", "JobTable"]

logger = logging.getLogger(__name__)

# The one bound on how many jobs anything remembers: the table's records kept beyond those holding something
# (a lease, tier entries, an estimate), and the default of every other per-job map (the estimator's tracker,
# the job-inference index, the server's metrics, the cluster router), so none outgrows another.
MAX_JOBS = 65536


class JobListener(Protocol):
    """What a job's events tell a component; every hook is a no-op unless overridden (subclass this
    Protocol to inherit the defaults). ``record`` is already updated for the event."""

    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job was added (its first, or its next after a tool call)."""
        return None

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job finished (not aborted); ``request.is_last_step``: the job ended with it."""
        return None

    def on_job_release(self, record: JobRecord, now: float) -> None:
        """The client said the job is over."""
        return None

    def on_job_drop(self, record: JobRecord) -> None:
        """The table dropped the record (it held nothing and was idle longest)."""
        return None


class JobTable:
    """The records by job id, least recently active first, and the listeners their events go to."""

    def __init__(self, max_jobs: int = MAX_JOBS) -> None:
        if max_jobs < 1:
            raise ValueError("a job table keeps at least one job")
        self.max_jobs = max_jobs
        self._records: OrderedDict[str, JobRecord] = OrderedDict()
        self.listeners: list[JobListener] = []

    # ---- queries -------------------------------------------------------------------------------
    def get(self, job_id: str | None) -> JobRecord | None:
        return None if job_id is None else self._records.get(job_id)

    def record(self, job_id: str) -> JobRecord:
        """The job's record, made (never active yet) if the table has none."""
        rec = self._records.get(job_id)
        if rec is None:
            rec = self._records[job_id] = JobRecord(job_id)
            self._bound(keep=rec)
        return rec

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[JobRecord]:
        return iter(list(self._records.values()))

    # ---- listeners -----------------------------------------------------------------------------
    def listen(self, listener: JobListener) -> None:
        """Tell ``listener`` of every later event, after the listeners registered before it."""
        if any(existing is listener for existing in self.listeners):
            raise ValueError("listener registered twice: it would be told of each event twice")
        self.listeners.append(listener)

    # ---- events --------------------------------------------------------------------------------
    def arrive(self, request: Request, now: float) -> JobRecord | None:
        """A turn of ``request``'s job arrived at ``now``; None (nothing told) for a request without a job."""
        rec = self._active(request.job_id, now)
        if rec is None:
            return None
        rec.tenant = request.tenant
        rec.inferred, rec.confirmed = request.job_inferred, request.job_confirmed
        try:
            self._publish("on_job_arrival", rec, request, now)
        finally:
            self._bound(keep=rec)
        return rec

    def end_turn(self, request: Request, now: float) -> JobRecord | None:
        """``request``'s turn finished (not aborted) at ``now``: a final turn ends the record."""
        job_id = request.job_id
        if job_id is None:
            return None
        if request.is_last_step:
            rec = self._records.get(job_id)
            if rec is None:
                rec = self._records[job_id] = JobRecord(job_id)
            rec.ended = True
        else:
            rec = self._active(job_id, now)
            assert rec is not None
        try:
            self._publish("on_turn_end", rec, request, now)
        finally:
            self._bound(keep=rec)
        return rec

    def release(self, job_id: str, now: float) -> JobRecord | None:
        """The client ended the job: the record ends and the listeners are told; idempotent. An unknown
        job is a no-op (None)."""
        rec = self._records.get(job_id)
        if rec is None:
            return None
        rec.ended = True
        self._publish("on_job_release", rec, now)
        return rec

    # ---- internals -----------------------------------------------------------------------------
    def _active(self, job_id: str | None, now: float) -> JobRecord | None:
        """The job's record, most recently active now (``last_active = now``, no longer ended)."""
        if job_id is None:
            return None
        rec = self._records.pop(job_id, None)
        if rec is None:
            rec = JobRecord(job_id)
        self._records[job_id] = rec  # re-inserted: the table's order is the order of activity
        rec.last_active = now
        rec.ended = False
        return rec

    def _publish(self, hook: str, *args: object) -> None:
        """Tell every listener; raise the first listener's exception once all were told."""
        error: Exception | None = None
        for listener in self.listeners:
            try:
                getattr(listener, hook)(*args)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the others were told
                if error is None:
                    error = exc
                else:
                    logger.exception("job listener %r failed in %s", listener, hook)
        if error is not None:
            raise error

    def _bound(self, keep: JobRecord | None = None) -> None:
        """Past ``max_jobs`` records, forget the least recently active ones that hold nothing (looking
        at twice as many as there are too many, so an overfull table costs a bounded scan); ``keep``,
        the record of the event or lookup at hand, is never forgotten."""
        extra = len(self._records) - self.max_jobs
        if extra <= 0:
            return
        idle = [r for r in islice(self._records.values(), 2 * extra) if r.holds_nothing() and r is not keep][:extra]
        for rec in idle:
            del self._records[rec.job_id]
            self._publish("on_job_drop", rec)
