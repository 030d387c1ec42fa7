"""The agent jobs each tenant holds open, counted at the server's edge, and the bound on them.

A job is *open* for its tenant from the first admitted turn that names it (a declared id: ``job_id``,
``session_id``, ``X-Session-ID``, ``metadata.user_id``, ...) and is not its last (``is_last_step``
false), until a final turn of it ends, the client releases it (``DELETE /v1/jobs/{id}``), or no turn
of it has been in flight for ``IDLE_S`` seconds (a client that left without ending its jobs). Between
its turns an open job is what the engine keeps for it: a job record, its estimator state and, under
CONTINUUM, a pin of its KV blocks. A tenant that opens thousands of jobs (``is_last_step: false``
each) would make every one of them cost the other tenants; ``--tenant-max-open-jobs`` bounds it.

Invariants:
- A turn of a job already open is never refused here (a tenant at its bound can still finish its
  jobs); a turn that would open one job more than the bound is refused (:class:`TooManyOpenJobs`: a
  429 in the API's error shape), for that tenant only, before anything is queued.
- A request without a job id, and a job's first turn when it is also its last, open nothing.
- With no bound (``cap`` None) nothing is tracked. With one, a tenant's table holds at most ``cap``
  jobs, and admitting a new job scans it once (dropping the jobs idle for ``IDLE_S``).
- Used on the event loop only (no lock): ``check`` and ``turn_started`` run with no await between them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["IDLE_S", "OpenJobs", "TooManyOpenJobs"]

IDLE_S = 300.0  # an open job with no turn in flight for this long no longer counts


class TooManyOpenJobs(Exception):
    """A turn would open one job more than its tenant's bound; ``retry_after`` seconds until one of its
    idle jobs stops counting (at most ``IDLE_S``)."""

    def __init__(self, open_jobs: int, cap: int, retry_after: float) -> None:
        super().__init__(f"this key has {open_jobs} agent jobs open (at most {cap}, --tenant-max-open-jobs): "
                         "end one (a turn with is_last_step: true, or DELETE /v1/jobs/{id}) or retry later")
        self.retry_after = retry_after


@dataclass
class _Job:
    turns: int = 0  # turns of it in flight
    final: bool = False  # a final turn of it is in flight: it closes when its turns end
    idle_since: float = 0.0  # when its last turn ended (meaningful while turns == 0)


class OpenJobs:
    """Each tenant's open jobs by (unscoped) job id, and the bound ``cap`` (None: no bound, nothing kept)."""

    def __init__(self, cap: int | None, idle_s: float = IDLE_S, clock: Callable[[], float] = time.monotonic) -> None:
        if cap is not None and cap < 1:
            raise ValueError("the open-job bound must be at least 1")
        self.cap = cap
        self.idle_s = idle_s
        self.clock = clock
        self._jobs: dict[str | None, dict[str, _Job]] = {}

    def count(self, tenant: str | None) -> int:
        """The tenant's open jobs now."""
        jobs = self._jobs.get(tenant)
        if jobs is None:
            return 0
        self._expire(tenant, jobs)
        return len(jobs)

    def check(self, tenant: str | None, job_id: str | None, is_last_step: bool) -> None:
        """``TooManyOpenJobs`` if a turn of ``job_id`` would open a job past the tenant's bound."""
        if self.cap is None or job_id is None or is_last_step:
            return
        jobs = self._jobs.get(tenant)
        if jobs is None or job_id in jobs:
            return
        self._expire(tenant, jobs)
        if len(jobs) >= self.cap:
            now = self.clock()
            idle = [j.idle_since for j in jobs.values() if j.turns == 0]
            wait = min(idle) + self.idle_s - now if idle else self.idle_s
            raise TooManyOpenJobs(len(jobs), self.cap, max(1.0, wait))

    def turn_started(self, tenant: str | None, job_id: str | None, is_last_step: bool) -> Callable[[], None] | None:
        """Count an admitted turn of ``job_id`` (after :meth:`check`); the returned callback (None when
        nothing is counted) says the turn ended: call it once."""
        if self.cap is None or job_id is None:
            return None
        jobs = self._jobs.setdefault(tenant, {})
        job = jobs.get(job_id)
        if job is None:
            if is_last_step:  # a one-turn job, or the last turn of one that no longer counts
                if not jobs:
                    del self._jobs[tenant]
                return None
            job = jobs[job_id] = _Job()
        job.turns += 1
        job.final = job.final or is_last_step
        return lambda: self._turn_ended(tenant, job_id, job)

    def release(self, tenant: str | None, job_id: str) -> None:
        """The client ended the job: it no longer counts (turns of it still in flight end uncounted)."""
        jobs = self._jobs.get(tenant)
        if jobs is not None and jobs.pop(job_id, None) is not None and not jobs:
            del self._jobs[tenant]

    def _turn_ended(self, tenant: str | None, job_id: str, job: _Job) -> None:
        job.turns -= 1
        if job.turns > 0:
            return
        job.idle_since = self.clock()
        if job.final:
            jobs = self._jobs.get(tenant)
            if jobs is not None and jobs.get(job_id) is job:
                self.release(tenant, job_id)

    def _expire(self, tenant: str | None, jobs: dict[str, _Job]) -> None:
        """Drop the tenant's jobs with no turn in flight for ``idle_s``."""
        cutoff = self.clock() - self.idle_s
        for job_id in [k for k, j in jobs.items() if j.turns == 0 and j.idle_since <= cutoff]:
            del jobs[job_id]
        if not jobs:
            self._jobs.pop(tenant, None)
