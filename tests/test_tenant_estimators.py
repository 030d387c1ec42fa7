"""Per-tenant estimators: one tenant's tool timings never move another tenant's TTLs."""

from __future__ import annotations

import pytest

from agent_engine.engine.job_hooks import JobHooks
from estimator import Estimator, EstimatorConfig
from scheduler import FakeClock

pytestmark = pytest.mark.core


def _hooks() -> tuple[JobHooks, FakeClock]:
    clock = FakeClock()
    est = Estimator(EstimatorConfig(ttl_policy="paper"), clock=clock)
    return JobHooks(est, tokenizer=None, clock=clock), clock


def _turns(hooks: JobHooks, clock: FakeClock, tenant: str | None, job: str, tool: str, gap: float, n: int) -> None:
    for _ in range(n):
        hooks.on_arrival(job, clock.now(), tenant)
        hooks.estimator_for(tenant).record_turn_finished(job, tool, clock.now())
        clock.advance(gap)
    hooks.on_arrival(job, clock.now(), tenant)


def test_observations_stay_with_their_tenant():
    hooks, clock = _hooks()
    _turns(hooks, clock, "noisy", "noisy/j1", "bash:pytest", 40.0, 6)
    noisy, quiet = hooks.estimator_for("noisy"), hooks.estimator_for("quiet")
    assert noisy.snapshot()["samples_total"] == 6
    assert quiet.snapshot()["samples_total"] == 0 and hooks.estimator.snapshot()["samples_total"] == 0
    assert hooks.estimator_for("noisy") is noisy  # one estimator per tenant, kept
    assert quiet.paper.reload_cost is hooks.estimator.paper.reload_cost  # the shared prior
    stats = hooks.stats()
    assert stats["estimator_tenants"] == 2 and stats["jobs_active"] == 1


def test_ending_a_job_finds_its_tenants_estimator():
    hooks, clock = _hooks()
    ended: list[str] = []
    hooks.job_listeners.append(lambda job, turns, jct: ended.append(job))
    _turns(hooks, clock, "t1", "t1/j", "bash:ls", 1.0, 2)
    hooks.on_job_released("t1/j")
    assert ended == ["t1/j"] and hooks.estimator_for("t1").active_jobs() == 0
    hooks.on_job_released("t1/j")  # idempotent
    assert ended == ["t1/j"]
