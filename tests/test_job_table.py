"""The job table (``scheduler.job_table``): one record per job, each event published once, in order.

Pinned down here: every event reaches every listener exactly once, in registration order (the
estimator, the scheduler's policy, tier and prefetcher, then whatever registers later); a listener
that raises does not keep the others from being told; releasing or abandoning an unknown job is a
no-op; a finished final turn ends the record; events are per turn, never per token (arrival,
admission, turn end or abort, release); the event's decisions (``ttl``, ``completion``) are cleared
before each event; the bound drops only records that hold nothing; and the estimator, wired by
``wire_scheduler``, keeps its per-job state on the scheduler's records and writes the first arrival,
the pin TTL and the job's completion there for the listeners after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from agent_engine.engine.job_hooks import JobHooks, wire_scheduler
from estimator import Estimator, EstimatorConfig
from estimator.job_tracker import JobTracker
from scheduler import FakeClock, FakeRunner, Request, Scheduler, SchedulerConfig
from scheduler.invariants import check_invariants
from scheduler.job_record import JobRecord
from scheduler.job_table import JobListener, JobTable
from tests.sched_helpers import EndedJobs, StubEstimator, make_request, run_to_completion

pytestmark = pytest.mark.core


@dataclass
class Recorder(JobListener):
    """Writes every event it is told to a shared log, as ``(name, event, job)``."""

    name: str
    log: list[tuple[str, str, str]]
    fail_on: str | None = None

    def _note(self, event: str, record: JobRecord) -> None:
        self.log.append((self.name, event, record.job_id))
        if event == self.fail_on:
            raise RuntimeError(f"{self.name} fails on {event}")

    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        self._note("arrival", record)

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self._note("final turn end" if request.is_last_step else "turn end", record)

    def on_job_admitted(self, record: JobRecord, request: Request, now: float) -> None:
        self._note("admitted", record)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        self._note("abort", record)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self._note("release", record)

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        self._note("abandon", record)

    def on_job_drop(self, record: JobRecord) -> None:
        self._note("drop", record)


@dataclass
class Spy:
    """Wraps a registered listener: forwards every event and logs it under the listener's name."""

    inner: JobListener
    name: str
    log: list[tuple[str, str]] = field(default_factory=list)

    def on_job_arrival(self, record: JobRecord, request: Request, now: float) -> None:
        self.log.append((self.name, "arrival"))
        self.inner.on_job_arrival(record, request, now)

    def on_job_admitted(self, record: JobRecord, request: Request, now: float) -> None:
        self.log.append((self.name, "admitted"))
        self.inner.on_job_admitted(record, request, now)

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self.log.append((self.name, "turn end"))
        self.inner.on_turn_end(record, request, now)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        self.log.append((self.name, "abort"))
        self.inner.on_turn_abort(record, request, now)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        self.log.append((self.name, "release"))
        self.inner.on_job_release(record, now)

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        self.log.append((self.name, "abandon"))
        self.inner.on_job_abandon(record, now)

    def on_job_drop(self, record: JobRecord) -> None:
        self.log.append((self.name, "drop"))
        self.inner.on_job_drop(record)


def _tiered(clock: FakeClock, policy: str = "continuum") -> Scheduler:
    cfg = SchedulerConfig(num_blocks=33, block_size=4, max_model_len=64, policy=policy, num_offload_blocks=8,
                          prefetch_horizon=2.0)
    return Scheduler(cfg, clock=clock, estimator=StubEstimator(lambda r: 5.0, lambda job, tenant: None))


# ---- the table on its own -----------------------------------------------------------------------
def test_each_event_reaches_each_listener_once_in_registration_order() -> None:
    jobs, log = JobTable(), []
    for name in ("first", "second", "third"):
        jobs.listen(Recorder(name, log))
    jobs.arrive(make_request("r1", [1, 2], job_id="j"), 0.0)
    jobs.end_turn(make_request("r1", [1, 2], job_id="j"), 1.0)
    jobs.release("j", 2.0)
    names = ["first", "second", "third"]
    assert log == [(n, "arrival", "j") for n in names] + [(n, "turn end", "j") for n in names] + [
        (n, "release", "j") for n in names]


def test_a_listener_that_raises_does_not_keep_the_others_from_being_told() -> None:
    jobs, log = JobTable(), []
    jobs.listen(Recorder("raises", log, fail_on="arrival"))
    jobs.listen(Recorder("after", log))
    with pytest.raises(RuntimeError, match="raises fails on arrival"):
        jobs.arrive(make_request("r1", [1, 2], job_id="j"), 0.0)
    assert log == [("raises", "arrival", "j"), ("after", "arrival", "j")]
    assert jobs.get("j") is not None and jobs.get("j").last_active == 0.0  # the record was updated first
    with pytest.raises(ValueError, match="twice"):
        jobs.listen(jobs.listeners[0])


def test_releasing_an_unknown_job_is_a_no_op_and_a_job_less_request_makes_no_record() -> None:
    jobs, log = JobTable(), []
    jobs.listen(Recorder("only", log))
    assert jobs.release("never-seen", 1.0) is None and jobs.abandon("never-seen", 1.0) is None
    assert jobs.arrive(make_request("r1", [1, 2]), 0.0) is None
    assert jobs.admit(make_request("r1", [1, 2]), 0.0) is None
    assert jobs.end_turn(make_request("r1", [1, 2]), 0.0) is None
    assert jobs.abort(make_request("r1", [1, 2]), 0.0) is None
    assert log == [] and len(jobs) == 0


def test_each_event_clears_the_decisions_of_the_one_before() -> None:
    jobs = JobTable()
    record = jobs.arrive(make_request("r1", [1, 2], job_id="j"), 0.0)
    seen: list[tuple[float, object]] = []

    @dataclass
    class Reader(JobListener):
        def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
            seen.append((record.ttl, record.completion))

        def on_job_release(self, record: JobRecord, now: float) -> None:
            seen.append((record.ttl, record.completion))

    jobs.listen(Reader())
    record.ttl, record.completion = 9.0, object()  # an earlier event's decisions
    jobs.end_turn(make_request("r1", [1, 2], job_id="j"), 1.0)
    record.ttl = 3.0
    jobs.release("j", 2.0)
    assert seen == [(0.0, None), (0.0, None)]


def test_a_final_turn_ends_the_record_and_a_later_turn_revives_it() -> None:
    jobs = JobTable()
    jobs.arrive(make_request("r1", [1, 2], job_id="j"), 0.0)
    record = jobs.end_turn(make_request("r1", [1, 2], job_id="j", is_last_step=True), 3.0)
    assert record is jobs.get("j") and record.ended and record.last_active == 0.0  # the end keeps its activity
    jobs.arrive(make_request("r2", [1, 2], job_id="j"), 4.0)  # a client reusing the id: a live job again
    assert not record.ended and record.last_active == 4.0


def test_the_bound_drops_only_idle_records_that_hold_nothing_oldest_first() -> None:
    jobs, log = JobTable(max_jobs=2), []
    jobs.listen(Recorder("only", log))
    jobs.arrive(make_request("r1", [1], job_id="busy"), 0.0)
    jobs.get("busy").prefetched = True  # holds something: never dropped
    jobs.arrive(make_request("r2", [1], job_id="old"), 1.0)
    jobs.arrive(make_request("r3", [1], job_id="new"), 2.0)
    assert [e for e in log if e[1] == "drop"] == [("only", "drop", "old")]
    assert "busy" in jobs and "old" not in jobs and "new" in jobs and len(jobs) == 2
    tight = JobTable(max_jobs=1)
    tight.arrive(make_request("r4", [1], job_id="a"), 0.0)
    tight.get("a").prefetched = True
    tight.arrive(make_request("r5", [1], job_id="b"), 1.0)
    assert tight.arrive(make_request("r6", [1], job_id="c"), 2.0) is tight.get("c")  # never its own event's
    assert "b" not in tight and len(tight) == 2
    with pytest.raises(ValueError):
        JobTable(max_jobs=0)


# ---- the table in the scheduler -----------------------------------------------------------------
LISTENERS = ("estimator", "policy", "tier", "prefetcher")


def test_the_scheduler_registers_estimator_policy_tier_and_prefetcher_in_that_order() -> None:
    s = _tiered(FakeClock())
    assert isinstance(s.jobs.listeners[0], StubEstimator)
    assert s.jobs.listeners[1:] == [s.policy, s.kv.tier, s.prefetcher]
    fcfs = Scheduler(SchedulerConfig(num_blocks=9, block_size=4, max_model_len=32))
    assert fcfs.jobs.listeners == [fcfs.policy]


def _spied(s: Scheduler) -> list[tuple[str, str]]:
    """Replace ``s``'s listeners by spies forwarding to them; returns the spies' shared log."""
    log: list[tuple[str, str]] = []
    s.jobs.listeners[:] = [Spy(listener, name, log) for listener, name in zip(s.jobs.listeners, LISTENERS, strict=True)]
    return log


def _told(event: str) -> list[tuple[str, str]]:
    return [(name, event) for name in LISTENERS]


def test_intake_admission_finish_and_release_publish_one_event_each_never_per_token() -> None:
    clock = FakeClock()
    s = _tiered(clock)
    log = _spied(s)
    runner = FakeRunner()
    s.add_request(make_request("t1", list(range(12)), max_tokens=6, job_id="j"))
    assert log == _told("arrival")
    run_to_completion(s, runner)  # admitted once, six tokens, one turn end
    assert log[4:] == _told("admitted") + _told("turn end")
    assert s.release_job("j") and not s.release_job("j")  # the pin ended once; the second is told, holds nothing
    assert log[12:] == _told("release") * 2
    assert not s.release_job("unknown") and len(log) == 20
    check_invariants(s)


def test_an_abort_is_the_jobs_event_and_ends_its_lease_before_the_blocks_are_freed() -> None:
    clock = FakeClock()
    s = _tiered(clock)
    runner = FakeRunner()
    s.add_request(make_request("t1", list(range(12)), max_tokens=2, job_id="j"))
    run_to_completion(s, runner)
    assert s.policy.holds_job("j")  # pinned for the 5 s the estimator wrote on the record
    log = _spied(s)
    s.add_request(make_request("t2", list(range(14)), max_tokens=2, job_id="j"))
    s.schedule()
    assert s.abort_requests(["t2", "unknown"])[0].request_id == "t2"
    assert log == _told("arrival") + _told("admitted") + _told("abort")
    assert not s.policy.holds_job("j") and s.kv.pool.num_used_blocks == 0
    assert s.policy.stats(clock.now()).counters["hit"] == 1  # admission ended the lease as a hit first
    check_invariants(s)


def test_a_lease_lives_on_its_job_record_and_a_final_turn_ends_the_record() -> None:
    clock = FakeClock()
    s = _tiered(clock)
    runner = FakeRunner()
    first = make_request("t1", list(range(12)), max_tokens=2, job_id="j", tenant="t-1")
    s.add_request(first)
    run_to_completion(s, runner)
    record = s.jobs.get("j")
    assert record is not None and record.tenant == "t-1" and record.lease is s.policy.leases.leases["j"]
    assert not record.ended and record.last_active == clock.now()
    s.add_request(make_request("t2", first.all_token_ids + [7], max_tokens=2, job_id="j", tenant="t-1",
                               is_last_step=True))
    run_to_completion(s, runner)
    assert record.ended and record.lease is None and not s.policy.holds_job("j")
    check_invariants(s)


def test_a_listener_that_raises_on_arrival_leaves_the_request_out() -> None:
    s = _tiered(FakeClock())
    log: list[tuple[str, str, str]] = []
    s.jobs.listen(Recorder("engine", log, fail_on="arrival"))
    with pytest.raises(RuntimeError):
        s.add_request(make_request("t1", list(range(12)), job_id="j"))
    assert not s.has_unfinished_requests() and log == [("engine", "arrival", "j")]
    check_invariants(s)


# ---- the estimator's part of the record ----------------------------------------------------------
def _wired(clock: FakeClock, policy: str = "continuum") -> tuple[Scheduler, JobHooks]:
    hooks = JobHooks(Estimator(EstimatorConfig(ttl_policy="fixed"), clock=clock), clock, pins=policy == "continuum")
    cfg = SchedulerConfig(num_blocks=17, block_size=4, max_model_len=64, policy=policy)
    return wire_scheduler(cfg, clock, hooks), hooks


def test_wired_job_hooks_keep_the_estimate_on_the_scheduler_record_and_write_what_the_policy_reads() -> None:
    clock = FakeClock(10.0)
    s, hooks = _wired(clock)
    ended: list[tuple[str, int, float]] = []
    s.jobs.listen(EndedJobs(ended))
    assert s.jobs.listeners[:2] == [hooks, s.policy]  # the estimator first: the policy reads what it wrote
    first = make_request("t1", list(range(8)), max_tokens=1, job_id="j", tenant="t-1", t=10.0, tool_name="bash")
    s.add_request(first)
    run_to_completion(s, FakeRunner())
    record = s.jobs.get("j")
    assert record.lease is not None and record.lease.expires_at == 10.0 + 2.0  # the fixed 2 s TTL, pinned
    clock.advance(5.0)
    second = make_request("t2", list(range(9)), max_tokens=1, job_id="j", tenant="t-1", t=15.0)
    s.add_request(second)
    assert second.job_arrival_time == 10.0  # stamped by the policy from the first arrival on the record
    estimate = record.estimate
    assert estimate is not None and estimate.turns == 2 and estimate.first_arrival == 10.0
    assert hooks.estimator.job_turns("j") is None  # the default tenant's estimator never reads t-1's job
    run_to_completion(s, FakeRunner())
    s.release_job("j")
    s.release_job("j")
    assert ended == [("j", 2, 5.0)] and record.estimate is None and not record.is_live()
    with pytest.raises(ValueError):
        hooks.keep_jobs_in(JobTable())


def test_a_final_turn_an_aborted_final_turn_and_an_abandoned_job_each_end_the_job_once() -> None:
    clock = FakeClock()
    s, hooks = _wired(clock, policy="fcfs")
    ended: list[tuple[str, int, float]] = []
    s.jobs.listen(EndedJobs(ended))
    s.add_request(make_request("a1", list(range(8)), max_tokens=1, job_id="a", is_last_step=True))
    s.add_request(make_request("b1", list(range(8)), max_tokens=5, job_id="b", is_last_step=True))
    s.add_request(make_request("c1", list(range(8)), max_tokens=1, job_id="c"))
    s.schedule()
    s.abort_requests(["b1"])
    run_to_completion(s, FakeRunner())
    assert [job for job, _, _ in ended] == ["b", "a"] and s.jobs.get("c").is_live()
    s.jobs.abandon("c", clock.now())
    s.jobs.abandon("c", clock.now())
    assert [job for job, _, _ in ended] == ["b", "a", "c"] and hooks.jobs_finished == 3
    assert not s.jobs.get("c").is_live()


def test_trackers_sharing_a_table_keep_their_own_jobs() -> None:
    table = JobTable()
    a, b = JobTracker(table=table), JobTracker(table=table)
    a.turn_arrived("ja", 1.0)
    b.turn_arrived("jb", 2.0)
    assert a.peek("jb") is None and b.peek("ja") is None and (a.active, b.active) == (1, 1)
    assert table.get("ja").estimate is a.peek("ja") and len(table) == 2
    assert b.forget("ja") is None and a.forget("ja") is not None and table.get("ja").estimate is None
    est = Estimator(EstimatorConfig(), clock=FakeClock())
    est.on_turn_arrival("x", 1.0)
    with pytest.raises(ValueError):  # a tracker that already holds jobs cannot move to another table
        est.keep_jobs_in(table)
