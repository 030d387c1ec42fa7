"""The policy registry, the scheduler <-> policy interface, and what stats() reports for pins."""

from __future__ import annotations

import pytest
from sched_helpers import make_request, make_scheduler, pinning, run_step

from scheduler import (
    POLICY_NAMES,
    ContinuumPolicy,
    FakeClock,
    FakeRunner,
    FcfsPolicy,
    PriorityPolicy,
    Scheduler,
    SchedulerConfig,
    SchedulingPolicy,
)
from scheduler.policy import PIN_COUNTER_NAMES, POLICIES, policy_class

pytestmark = pytest.mark.core


def test_registry_names_classes_and_config_validation() -> None:
    assert POLICY_NAMES == ("fcfs", "priority", "continuum")
    assert POLICIES == {"fcfs": FcfsPolicy, "priority": PriorityPolicy, "continuum": ContinuumPolicy}
    for name, cls in POLICIES.items():
        s = make_scheduler(policy=name)
        assert type(s.policy) is cls and isinstance(s.policy, SchedulingPolicy) and s.config.policy == name
    with pytest.raises(ValueError, match="policy must be one of"):  # the registry, not the config, validates
        Scheduler(SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, policy="lifo"))
    assert [policy_class(n).uses_pins for n in POLICY_NAMES] == [False, False, True]


def test_policies_answer_for_themselves() -> None:
    s = make_scheduler(policy="continuum", estimator=pinning(10.0))
    assert not s.policy.holds_job("job") and not make_scheduler(policy="fcfs").policy.holds_job("job")
    s.add_request(make_request("t1", list(range(10)), job_id="job"))
    runner = FakeRunner()
    while s.has_unfinished_requests():
        out = s.schedule()
        s.update(out, runner.execute(out))
    assert s.policy.holds_job("job") and not s.policy.holds_job("other")


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_policies_without_pins_hold_nothing(policy: str) -> None:
    s = Scheduler(SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, policy=policy),
                  clock=FakeClock(), estimator=pinning(lambda r: 10.0))
    s.add_request(make_request("t1", list(range(10)), job_id="job"))
    runner = FakeRunner()
    while s.has_unfinished_requests():
        run_step(s, runner)
    st = s.stats()
    assert st.blocks_in_use == 0 and st.num_pinned_jobs == 0 and not s.release_job("job")
    assert st.pins.as_dict() == {**{k: 0 for k in PIN_COUNTER_NAMES}, "pinned_block_seconds": 0.0,
                                 "soft_block_seconds": 0.0}
    assert st.pinned_block_seconds == st.soft_block_seconds == 0.0


def test_stats_report_live_block_seconds() -> None:
    clock = FakeClock()
    s = Scheduler(SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, policy="continuum"),
                  clock=clock, estimator=pinning(lambda r: 10.0))
    s.add_request(make_request("t1", list(range(10)), job_id="job"))
    runner = FakeRunner()
    while s.has_unfinished_requests():
        run_step(s, runner)
    t0 = clock.now()
    clock.advance(2.0)
    st = s.stats()
    assert st.num_pinned_jobs == 1 and st.blocks_pinned == 3
    assert st.pins.pinned_block_seconds == 0.0  # booked only when the lease ends
    assert st.pinned_block_seconds == 3 * (clock.now() - t0)  # live


def test_waiting_queue_resorts_when_the_policy_order_changes() -> None:
    s = Scheduler(SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, policy="continuum",
                                  max_num_seqs=1), clock=FakeClock(), estimator=pinning(lambda r: 10.0))
    runner = FakeRunner()
    s.add_request(make_request("b1", list(range(10)), t=0.0, job_id="B", job_arrival_time=1.0))
    while s.has_unfinished_requests():
        run_step(s, runner)
    s.add_request(make_request("a", [1, 2, 3], t=1.0, job_id="A", job_arrival_time=0.0))
    s.add_request(make_request("b2", list(range(12)), t=2.0, job_id="B", job_arrival_time=1.0))
    s.waiting.order()
    assert [r.request_id for r in s.waiting] == ["b2", "a"]  # B holds a lease
    version = s.policy.state_version()
    assert s.release_job("B") and s.policy.state_version() != version
    s.waiting.order()
    assert [r.request_id for r in s.waiting] == ["a", "b2"]  # program order again
