"""Per-tenant estimators: one tenant's tool timings never move another tenant's TTLs."""

from __future__ import annotations

import pytest

from agent_engine.engine.job_hooks import JobHooks
from estimator import Estimator, EstimatorConfig
from scheduler import FakeClock, JobTable
from tests.sched_helpers import EndedJobs, make_request

pytestmark = pytest.mark.core


def _hooks() -> tuple[JobHooks, FakeClock, JobTable]:
    clock = FakeClock()
    est = Estimator(EstimatorConfig(ttl_policy="paper"), clock=clock)
    hooks, table = JobHooks(est, clock), JobTable()
    hooks.keep_jobs_in(table)
    table.listen(hooks)
    return hooks, clock, table


def _turns(table: JobTable, clock: FakeClock, tenant: str | None, job: str, tool: str, gap: float, n: int) -> None:
    """``n`` turns of ``job`` calling ``tool``, each back ``gap`` seconds later, as the table tells them."""
    for i in range(n + 1):
        turn = make_request(f"{job}-{i}", [1, 2], job_id=job, tenant=tenant, tool_name=tool, t=clock.now())
        table.arrive(turn, clock.now())
        if i < n:
            table.end_turn(turn, clock.now())
            clock.advance(gap)


def test_observations_stay_with_their_tenant():
    hooks, clock, table = _hooks()
    _turns(table, clock, "noisy", "noisy/j1", "bash:pytest", 40.0, 6)
    noisy, quiet = hooks.estimator_for("noisy"), hooks.estimator_for("quiet")
    assert noisy.snapshot()["samples_total"] == 6
    assert quiet.snapshot()["samples_total"] == 0 and hooks.estimator.snapshot()["samples_total"] == 0
    assert hooks.estimator_for("noisy") is noisy  # one estimator per tenant, kept
    assert quiet.paper.reload_cost is hooks.estimator.paper.reload_cost  # the shared prior
    stats = hooks.stats()
    assert stats["estimator_tenants"] == 2 and stats["jobs_active"] == 1


def test_ending_a_job_finds_its_tenants_estimator():
    hooks, clock, table = _hooks()
    ended: list[tuple[str, int, float]] = []
    table.listen(EndedJobs(ended))
    _turns(table, clock, "t1", "t1/j", "bash:ls", 1.0, 2)
    table.release("t1/j", clock.now())
    assert ended == [("t1/j", 3, 2.0)] and hooks.estimator_for("t1").active_jobs() == 0
    table.release("t1/j", clock.now())  # idempotent
    assert len(ended) == 1
