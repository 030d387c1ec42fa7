"""The job table: one record per agent job, and the one stream a job's life is published on.

The scheduler owns one ``JobTable``. Its ``JobRecord``s (``scheduler.job_record``) hold every per-job
fact; the components that care about jobs register as ``JobListener``s and are told of each event once,
by the table, and by nothing else (no component calls another's job hook, no injected callable reaches
back up the floors):

- ``arrive``: a turn of the job was added (``Scheduler.add_request``);
- ``admit``: a turn of the job was admitted to the running batch, holding its prefix hits
  (``Admission._admit``; again after each preemption);
- ``end_turn``: a turn finished, not aborted (``Scheduler._finish``), still holding its blocks; it
  carries its output (``Request.read_output``: text and tool calls); ``request.is_last_step`` says it
  was the job's final turn, which ends the record;
- ``abort``: a turn was aborted (``Scheduler._finish``), still holding its blocks;
- ``release``: the client said the job is over (``Scheduler.release_job``); an unknown job is a no-op;
- ``abandon``: nobody will continue the job (the engine's job inference forgot it); unknown: a no-op;
- ``on_job_drop``: the table's bound dropped a record that held nothing (the oldest activity first).

Listeners are told in registration order, fixed by the scheduler: first the estimator (when one is
wired: ``Scheduler(..., estimator=...)``; it writes the job's first arrival, the ended turn's pin TTL
and the job's completion onto the record), then the policy (which reads them), the second KV tier,
the prefetcher; whatever registers later (the server's metrics) comes after them. Before telling them,
the table updates the record itself (``last_active``, ``ended``, the tenant and hint source) and
clears the event's decisions (``ttl``, ``completion``), so a listener reads the record as of the event.

Invariants:
- Each event reaches each listener exactly once. A listener that raises does not keep the others from
  being told: every listener is told, then the first exception is raised again (later ones are logged).
- Events are per turn, never per token: nothing here runs on the step's hot path.
- A request without a job publishes nothing (its blocks are the scheduler's alone).
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

    def on_job_admitted(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job was admitted and holds its prefix hits (first admission or a resumption)."""
        return None

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job finished (not aborted), its blocks still its own: what the scheduler still
        finds on it afterwards it frees. ``request.is_last_step``: the job ended with it;
        ``request.read_output()``: its text and tool calls."""
        return None

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        """A turn of the job was aborted; the scheduler frees its blocks right after."""
        return None

    def on_job_release(self, record: JobRecord, now: float) -> None:
        """The client said the job is over."""
        return None

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        """Nobody will continue the job (an inferred job the engine's index forgot); ``now``: when its
        last turn finished."""
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

    def admit(self, request: Request, now: float) -> JobRecord | None:
        """A turn of ``request``'s job was admitted at ``now``; None (nothing told) without a job or record."""
        rec = self.get(request.job_id)
        if rec is not None:
            self._publish("on_job_admitted", rec, request, now)
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

    def abort(self, request: Request, now: float) -> JobRecord | None:
        """``request``'s turn was aborted at ``now``; None (nothing told) without a job or record."""
        rec = self.get(request.job_id)
        if rec is not None:
            self._publish("on_turn_abort", rec, request, now)
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

    def abandon(self, job_id: str, at: float) -> JobRecord | None:
        """Nobody will continue the job (its last turn finished at ``at``); an unknown job is a no-op."""
        rec = self._records.get(job_id)
        if rec is not None:
            self._publish("on_job_abandon", rec, at)
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

    def _publish(self, hook: str, record: JobRecord, *args: object) -> None:
        """Tell every listener, the event's decisions cleared first; raise the first listener's exception
        once all were told."""
        record.ttl, record.completion = 0.0, None
        error: Exception | None = None
        for listener in self.listeners:
            try:
                getattr(listener, hook)(record, *args)
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
