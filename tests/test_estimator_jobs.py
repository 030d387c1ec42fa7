"""Per-job state: first arrival, turn count, pending turn, ending a job, and the LRU bound."""

from __future__ import annotations

import pytest

from estimator import Estimator, EstimatorConfig, JobTracker, PendingTurn
from scheduler.clock import FakeClock

pytestmark = pytest.mark.core


def make() -> tuple[Estimator, FakeClock]:
    clock = FakeClock(100.0)
    return Estimator(EstimatorConfig(eta_min_jobs=1), clock=clock), clock


def test_first_arrival_and_turn_count() -> None:
    est, clock = make()
    assert est.job_turns("j") is None and est.job_first_arrival("j") is None and est.active_jobs() == 0
    assert est.on_turn_arrival("j") == 100.0  # the clock's time
    assert est.job_turns("j") == 1 and est.job_first_arrival("j") == 100.0 and est.active_jobs() == 1
    assert est.on_turn_arrival("j", 105.0) == 100.0  # the first arrival, not this one
    assert est.job_turns("j") == 2 and est.active_jobs() == 1


def test_arrival_measures_the_pending_turn_but_not_on_the_first_turn() -> None:
    est, _ = make()
    est.record_turn_finished("j", "bash:ls", 50.0)  # a finish recorded before the job's first arrival
    est.on_turn_arrival("j", 100.0)
    assert est.history.count(None) == 0  # the first turn measures nothing
    est.record_turn_finished("j", "bash:ls", 101.0)
    est.on_turn_arrival("j", 103.5)
    assert est.history.count("bash:ls") == 1 and est.history.mean("bash:ls") == pytest.approx(2.5)
    assert est.snapshot()["durations_measured"] == 1 and est.job_turns("j") == 2


def test_end_job_feeds_eta_forgets_and_is_idempotent() -> None:
    est, _ = make()
    for t in (10.0, 20.0, 30.0):
        est.on_turn_arrival("j", t)
    assert est.end_job("j") == (3, 10.0)
    assert len(est.eta) == 1 and est.snapshot()["jobs_finished"] == 1
    assert est.job_turns("j") is None and est.job_first_arrival("j") is None and est.active_jobs() == 0
    assert est.end_job("j") is None and len(est.eta) == 1
    est.record_turn_finished("never-arrived", "bash:ls", 1.0)
    assert est.end_job("never-arrived") is None and est.snapshot()["pending_jobs"] == 1
    est.on_turn_arrival("j", 40.0)  # an ended job that comes back starts afresh
    assert est.job_turns("j") == 1 and est.job_first_arrival("j") == 40.0


def test_record_job_finished_ends_an_active_job() -> None:
    est, _ = make()
    est.on_turn_arrival("j", 1.0)
    est.record_job_finished("j", 1)
    assert est.active_jobs() == 0 and est.end_job("j") is None


def test_tracker_is_lru_bounded_and_counts_active_jobs() -> None:
    tr = JobTracker(max_jobs=2)
    assert tr.turn_arrived("a", 1.0) == 1.0
    tr.turn_arrived("b", 2.0)
    tr.turn_arrived("a", 3.0)  # a is now the most recently used
    tr.finish_turn("c", PendingTurn("bash:ls", 4.0))  # evicts b, the least recently used
    assert tr.peek("b") is None and len(tr) == 2 and tr.active == 1
    st = tr.peek("a")
    assert st is not None and (st.turns, st.first_arrival) == (2, 1.0)
    tr.turn_arrived("c", 5.0)
    assert tr.active == 2 and tr.pending() == {"c": PendingTurn("bash:ls", 4.0)}
    forgotten = tr.forget("a")
    assert forgotten is not None and forgotten.turns == 2 and tr.active == 1
    assert tr.forget("a") is None and tr.active == 1


def test_tracker_keeps_a_bounded_duration_history() -> None:
    tr = JobTracker(max_durations_per_job=3)
    for i in range(5):
        tr.finish_turn("j", PendingTurn(None, float(i)))
        assert tr.arrive("j", i + 0.5 * i) == (PendingTurn(None, float(i)), pytest.approx(0.5 * i))
    assert tr.arrive("j", 99.0) is None  # nothing pending
    st = tr.peek("j")
    assert st is not None and st.durations == [1.0, 1.5, 2.0]
    tr.finish_turn("k", PendingTurn(None, 10.0))
    assert tr.arrive("k", 9.0) == (PendingTurn(None, 10.0), 0.0)  # clock skew clamps at 0
