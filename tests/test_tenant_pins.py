"""Per-tenant pin budgets: one tenant's pins never take the whole budget from another tenant."""

from __future__ import annotations

import pytest
from sched_helpers import make_request, pinning, run_to_completion

from scheduler import FakeClock, FakeRunner, Scheduler, SchedulerConfig
from scheduler.invariants import check_invariants

pytestmark = pytest.mark.core


def _sched(per_tenant: float) -> Scheduler:
    cfg = SchedulerConfig(num_blocks=41, block_size=4, max_model_len=64, policy="continuum",
                          max_pinned_fraction=0.5, max_pinned_fraction_per_tenant=per_tenant)
    return Scheduler(cfg, clock=FakeClock(), estimator=pinning(lambda r: 30.0))


def _finish_turn(s: Scheduler, runner: FakeRunner, rid: str, job: str, tenant: str, base: int) -> None:
    s.add_request(make_request(rid, list(range(base, base + 12)), 4, job_id=job, tenant=tenant))
    run_to_completion(s, runner)
    check_invariants(s)


def test_a_tenant_at_its_cap_pins_soft_while_another_still_pins_hard():
    s, runner = _sched(per_tenant=0.5), FakeRunner()
    table = s.policy.leases
    assert table.max_pinned_blocks == 20 and table.max_pinned_blocks_per_tenant == 10
    for k in range(4):  # each turn leaves 3 hashed blocks (15 computed tokens): 12 outgrow its 10
        _finish_turn(s, runner, f"a{k}", f"greedy-{k}", "greedy", 100 + 20 * k)
    assert table.pinned_by_tenant["greedy"] == 10
    assert table.num_pinned_blocks == 10 and table.num_soft_blocks > 0
    _finish_turn(s, runner, "b0", "polite-0", "polite", 900)
    assert table.leases["polite-0"].num_hard == 3 and table.pinned_by_tenant["polite"] == 3


def test_without_a_per_tenant_share_one_tenant_may_use_the_whole_budget():
    s, runner = _sched(per_tenant=1.0), FakeRunner()
    for k in range(7):
        _finish_turn(s, runner, f"a{k}", f"greedy-{k}", "greedy", 100 + 20 * k)
    assert s.policy.leases.pinned_by_tenant["greedy"] == 20


def test_bad_share_is_rejected():
    with pytest.raises(ValueError, match="per_tenant"):
        SchedulerConfig(num_blocks=8, block_size=4, max_model_len=16, max_pinned_fraction_per_tenant=1.5)
