"""TTL policies (fixed, paper), cold start, measurements, eta, T, R(ctx) and the facade."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from estimator import (
    EmpiricalCDF,
    Estimator,
    EstimatorConfig,
    EtaTracker,
    ReloadCostModel,
    TTLRequest,
    best_tau,
)
from scheduler.clock import FakeClock

pytestmark = pytest.mark.core

NO_RELOAD = ReloadCostModel(0.0, 0.0, 0.0)


def make(policy: str = "paper", reload_cost: ReloadCostModel = NO_RELOAD, **kw: object) -> tuple[Estimator, FakeClock]:
    clock = FakeClock(100.0)
    cfg = EstimatorConfig(ttl_policy=policy, **kw)  # type: ignore[arg-type]
    return Estimator(cfg, clock=clock, reload_cost=reload_cost), clock


def feed(est: Estimator, tool: str | None, seconds: float, n: int, job: str = "j") -> None:
    """Record ``n`` measured durations of ``tool`` through the public record_* path."""
    for _ in range(n):
        est.record_turn_finished(job, tool, 0.0)
        assert est.record_turn_arrival(job, seconds) == pytest.approx(seconds)


# ---------------------------------------------------------------- tau*


def test_best_tau_hand_computed() -> None:
    # durations [1, 1, 2, 10]: P(1) = 0.5, P(2) = 0.75, P(10) = 1.0; gain T*eta + R = 5
    #   tau=0: 0;  tau=1: 0.5*5 - 1 = 1.5;  tau=2: 0.75*5 - 2 = 1.75;  tau=10: 5 - 10 = -5  -> tau* = 2
    dist = EmpiricalCDF([1, 1, 2, 10])
    assert best_tau(dist, 5.0) == (2.0, pytest.approx(1.75))
    # gain 1: tau=1: -0.5, tau=2: -1.25, tau=10: -9 -> every pin loses: tau* = 0 (don't pin)
    assert best_tau(dist, 1.0)[0] == 0.0
    # gain 40: tau=1: 19, tau=2: 28, tau=10: 30 -> tau* = 10
    assert best_tau(dist, 40.0) == (10.0, pytest.approx(30.0))
    # gain 0 -> 0
    assert best_tau(dist, 0.0)[0] == 0.0


def test_best_tau_ties_pick_the_smaller() -> None:
    # [1, 3], gain 4: tau=1: 0.5*4 - 1 = 1; tau=3: 1*4 - 3 = 1 -> tie -> 1
    assert best_tau(EmpiricalCDF([1, 3]), 4.0)[0] == 1.0
    # [2], gain 2: tau=2: 1*2 - 2 = 0 == tau=0's 0 -> 0
    assert best_tau(EmpiricalCDF([2]), 2.0)[0] == 0.0


def test_best_tau_zero_durations() -> None:
    # a tool that returns instantly: P(0) = 1, value at 0 = gain: tau* = 0 (the job is back before a pin matters)
    assert best_tau(EmpiricalCDF([0, 0]), 3.0) == (0.0, 3.0)


def test_quantile_cdf() -> None:
    d = EmpiricalCDF.from_quantiles([0.1, 0.5, 0.9], [1.0, 2.0, 4.0])
    assert (d.cdf(0.5), d.cdf(1.0), d.cdf(3.0), d.cdf(99.0)) == (0.0, 0.1, 0.5, 0.9)
    # gain 10: tau=1: 0 ; tau=2: 3 ; tau=4: 5 -> 4
    assert best_tau(d, 10.0)[0] == 4.0


# ---------------------------------------------------------------- paper policy through the facade


def test_paper_policy_cold_start_switches_at_exactly_k() -> None:
    est, _ = make(reload_cost=ReloadCostModel(5.0, 0.0, 0.0), default_ttl=7.0)  # gain = R = 5 (T = 0)
    # f always takes 3 s, g 0.5 s.  Per-tool CDF of f: tau=3 -> 1*5 - 3 = 2 -> tau* = 3.
    feed(est, "bash:g", 0.5, 59)
    feed(est, "bash:f", 3.0, 40)
    assert est.history.count(None) == 99
    assert est.ttl("bash:f", 1000, 3) == 7.0  # 99 < K: the default
    feed(est, "bash:g", 0.5, 1)
    # 100 in total, f has 40 < K: all tools, P(0.5) = 60/100: 0.6*5 - 0.5 = 2.5 > P(3)*5 - 3 = 2 -> 0.5
    assert est.ttl("bash:f", 1000, 3) == 0.5
    assert est.snapshot()["ttl_source_all_tools"] == 1
    feed(est, "bash:g", 0.5, 140)
    feed(est, "bash:f", 3.0, 59)
    assert est.history.count("bash:f") == 99
    # all tools: P(0.5) = 200/299 -> 3.34 - 0.5 = 2.84 > 2 -> 0.5
    assert est.ttl("bash:f", 1000, 3) == 0.5
    feed(est, "bash:f", 3.0, 1)  # f reaches K = 100: its own CDF -> 3
    assert est.ttl("bash:f", 1000, 3) == 3.0
    assert est.ttl("bash:g", 1000, 3) == 0.5  # g has 200 >= K: P(0.5) = 1 -> 5 - 0.5 = 4.5


def test_no_tool_uses_all_tools_distribution() -> None:
    est, _ = make(reload_cost=ReloadCostModel(5.0, 0.0, 0.0))
    feed(est, "bash:g", 0.5, 60)
    feed(est, "bash:f", 3.0, 40)
    assert est.ttl(None, 1000, 3) == 0.5  # same numbers as the all-tools case above: pinned, not 0


def test_paper_gain_uses_t_eta_and_r() -> None:
    # R(ctx) = 1e-4 * ctx -> R(10000) = 1; T = mean(4, 6) = 5; eta = 1 before enough jobs -> gain 6
    est, _ = make(reload_cost=ReloadCostModel(0.0, 1e-4, 0.0), queue_delay_window=2)
    feed(est, "bash:f", 5.0, 100)
    assert est.ttl("bash:f", 10000, 1) == 0.0  # gain 1: 1 - 5 < 0
    est.record_unpinned_queue_delay(4.0)
    est.record_unpinned_queue_delay(6.0)
    assert est.paper.gain(est_req("bash:f", 10000)) == pytest.approx(6.0)
    assert est.ttl("bash:f", 10000, 1) == 5.0  # 6 - 5 = 1 > 0
    est.record_unpinned_queue_delay(0.0)  # window 2: T = (6 + 0) / 2 = 3 -> gain 4 -> 4 - 5 < 0
    assert est.ttl("bash:f", 10000, 1) == 0.0


def test_with_a_second_tier_a_miss_costs_the_cheaper_reload_and_no_queueing() -> None:
    # R(10000) = 1 s of prefill, T * eta = 4.2: gain 5.2. The tier loads it back in 0.1 s, and a job
    # warm in the tier does not queue as an evicted one: gain 0.1.
    est, _ = make(reload_cost=ReloadCostModel(0.0, 1e-4, 0.0), queue_delay_window=2)
    feed(est, "bash:f", 5.0, 100)
    est.record_unpinned_queue_delay(4.2)
    est.record_unpinned_queue_delay(4.2)
    assert est.ttl("bash:f", 10000, 1) == 5.0  # gain 5.2 > 5: pinned
    est.set_tier_reload_cost(ReloadCostModel(0.0, 1e-5, 0.0))
    assert est.paper.gain(est_req("bash:f", 10000)) == pytest.approx(0.1)
    assert est.ttl("bash:f", 10000, 1) == 0.0  # 0.1 - 5 < 0: demote, don't pin
    est.set_tier_reload_cost(ReloadCostModel(0.0, 1e-3, 0.0))  # a tier slower than recompute: R wins
    assert est.paper.gain(est_req("bash:f", 10000)) == pytest.approx(1.0)


def est_req(tool: str, ctx: int) -> TTLRequest:
    return TTLRequest(tool, ctx, 0)


def test_ttl_hint_caps() -> None:
    est, _ = make(reload_cost=ReloadCostModel(100.0, 0.0, 0.0))
    feed(est, "bash:pip", 30.0, 100)
    assert est.ttl("bash:pip", 0, 1) == 30.0
    assert est.ttl("bash:pip", 0, 1, ttl_hint=12.5) == 12.5
    assert est.ttl("bash:pip", 0, 1, ttl_hint=0.0) == 0.0
    assert est.ttl("bash:pip", 0, 1, ttl_hint=99.0) == 30.0


def test_eta_hand_computed() -> None:
    # jobs of N=1 and N=3: (k, N-k) = (0,1), (0,3), (1,2), (2,1): k mean .75, r mean 1.75,
    # cov = -1.25/4, var k = var r = 2.75/4 -> corr = -1.25/2.75 -> eta = 0.4545...
    eta = EtaTracker(min_jobs=2)
    assert eta.value == 1.0
    eta.add_job(1)
    assert eta.value == 1.0  # not enough jobs
    eta.add_job(3)
    assert eta.value == pytest.approx(1.25 / 2.75)
    same = EtaTracker(min_jobs=2)
    for _ in range(5):
        same.add_job(10)
    assert same.value == pytest.approx(1.0)  # equal lengths: k and N-k perfectly anti-correlated


def test_record_job_finished_feeds_eta() -> None:
    est, _ = make(eta_min_jobs=2)
    est.record_job_finished("a", 1)
    est.record_job_finished("b", 3)
    assert est.snapshot()["eta"] == pytest.approx(1.25 / 2.75)


# ---------------------------------------------------------------- fixed policy


def test_fixed_rule() -> None:
    est, _ = make("fixed")
    assert est.ttl("bash:never_seen", 50_000, 0) == 2.0  # unseen tools count as 0 s
    feed(est, "bash:ls", 2.0, 3)
    assert est.ttl("bash:ls", 0, 0) == 2.0  # mean == threshold: not exceeding -> pin
    feed(est, "bash:pip", 2.0, 1)
    feed(est, "bash:pip", 2.03, 1)
    assert est.ttl("bash:pip", 0, 0) == 0.0  # mean 2.015 > 2.0 -> don't pin
    assert est.ttl("bash:ls", 0, 0, ttl_hint=0.5) == 0.5
    assert est.ttl(None, 0, 0) == 0.0  # no tool: all-tools mean (3*2 + 2 + 2.03)/5 = 2.006 > 2


def test_fixed_rule_no_tool_and_threshold() -> None:
    est, _ = make("fixed", pin_threshold=3.0)
    feed(est, "bash:ls", 0.3, 5)
    assert est.ttl(None, 0, 0) == 3.0  # all-tools mean 0.3 <= 3
    fork, _ = make("fixed", pin_without_tool=False)
    assert fork.ttl(None, 0, 0) == 0.0  # the public fork's behaviour
    assert est.ttl("bash:ls", 0, 0) == 3.0


def test_fixed_ignores_cold_start() -> None:
    est, _ = make("fixed", default_ttl=9.0)
    feed(est, "bash:pip", 5.0, 1)
    assert est.ttl("bash:pip", 0, 0) == 0.0


# ---------------------------------------------------------------- measurement and facade


def test_measurement_per_job() -> None:
    est, clock = make()
    assert est.record_turn_arrival("a") is None  # first turn: nothing pending
    est.record_turn_finished("a", "bash:grep")  # at clock time 100
    est.record_turn_finished("b", "bash:pip", 101.0)
    clock.advance(2.5)
    assert est.record_turn_arrival("a") == pytest.approx(2.5)
    assert est.record_turn_arrival("a") is None  # measured once
    assert est.record_turn_arrival("b", 111.0) == pytest.approx(10.0)
    est.record_turn_finished("c", "bash:ls", 200.0)
    assert est.record_turn_arrival("c", 199.0) == 0.0  # clamped
    assert est.history.count("bash:grep") == 1 and est.history.count(None) == 3
    est.record_turn_finished("d", "bash:ls", 5.0)
    est.record_job_finished("d", 4)
    assert est.record_turn_arrival("d", 9.0) is None  # a finished job is forgotten
    snap = est.snapshot()
    assert snap["durations_measured"] == 3 and snap["jobs_finished"] == 1 and snap["policy"] == "paper"


def test_on_turn_finished_parses_and_hint_name_wins() -> None:
    est, clock = make(default_ttl=2.0)
    d = est.on_turn_finished("j", text="```bash\ncd /t && python -m pytest -x\n```", context_tokens=10, turn_index=1)
    assert d.tool_name == "bash:pytest" and d.ttl == 2.0  # cold start default
    clock.advance(1.0)
    assert est.record_turn_arrival("j") == 1.0
    assert est.history.count("bash:pytest") == 1
    d = est.on_turn_finished("j", text="```bash\nls\n```", tool_name="my_tool", ttl_hint=0.25)
    assert d.tool_name == "my_tool" and d.ttl == 0.25


def test_expected_return_time() -> None:
    est, clock = make()
    assert est.expected_return_time("x") is None
    est.record_turn_finished("x", "bash:cat", 100.0)
    assert est.expected_return_time("x") == 100.0 + 2.0  # no history: finish + default TTL
    feed(est, "bash:ls", 1.0, 50, job="other")
    feed(est, "bash:ls", 3.0, 50, job="other")
    # all-tools (cat has < K): mean 2 -> back at 102; after 1.5 s elapsed: residual E[D-1.5 | D>1.5] = 1.5
    assert est.expected_return_time("x") == pytest.approx(102.0)
    clock.set(101.5)
    assert est.expected_return_time("x") == pytest.approx(103.0)
    clock.set(110.0)  # beyond every recorded duration: now + mean
    assert est.expected_return_time("x") == pytest.approx(112.0)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        EstimatorConfig(ttl_policy="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EstimatorConfig(cold_start_samples=0)


def test_thread_safety_smoke() -> None:
    est, _ = make()
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(300):
                job = f"w{w}-{i % 7}"
                est.record_turn_finished(job, "bash:grep" if i % 2 else None, float(i))
                est.ttl("bash:grep", 1000, i)
                est.record_turn_arrival(job, float(i) + 0.25)
                est.snapshot()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert est.history.count(None) == 1200


# ---------------------------------------------------------------- R(ctx)


def test_reload_cost_fit_recovers_quadratic(tmp_path) -> None:  # noqa: ANN001
    n = np.array([128, 512, 1024, 4096, 8192, 16384, 32768], float)
    secs = 0.02 + 5e-5 * n + 2e-10 * n**2
    m = ReloadCostModel.fit(n, secs)
    assert (m.a, m.b, m.c) == pytest.approx((0.02, 5e-5, 2e-10), rel=1e-6)
    m.save(tmp_path / "r.json")
    assert ReloadCostModel.load(tmp_path / "r.json") == m
    est = Estimator(EstimatorConfig(reload_cost_profile=str(tmp_path / "r.json")), clock=FakeClock())
    assert est.paper.reload_cost == m


def test_reload_cost_fit_is_non_negative() -> None:
    n = np.array([100, 1000, 2000, 4000], float)
    secs = np.array([0.5, 0.4, 0.6, 1.0])  # would want a negative linear term
    m = ReloadCostModel.fit(n, secs)
    assert min(m.a, m.b, m.c) >= 0
    assert all(m(x) >= 0 for x in [0, 10, 1e6])
    with pytest.raises(ValueError):
        ReloadCostModel(-1.0, 0.0, 0.0)


def test_reload_cost_is_corrected_by_reloads_measured_under_load() -> None:
    from estimator import Estimator, EstimatorConfig, ReloadCostModel, TTLRequest
    from scheduler import FakeClock

    est = Estimator(EstimatorConfig(ttl_policy="paper"), clock=FakeClock(), reload_cost=ReloadCostModel(0.0, 1e-3, 0.0))
    req = TTLRequest("bash:ls", context_tokens=1000)
    assert est.paper.gain(req) == pytest.approx(1.0)  # T = 0 yet: R(1000) = 1 s
    est.record_reload(500, 1.5)  # a 500-token reload took 1.5 s: 3x the idle profile
    est.record_reload(500, 2.5)  # 5x
    assert est.paper.gain(req) == pytest.approx(4.0)
    est.record_reload(500, 0.1)  # faster than the profile never shrinks R below the profile
    assert est.paper.gain(req) == pytest.approx((3 + 5 + 0.2) / 3)
    assert est.snapshot()["reload_scale"] == pytest.approx((3 + 5 + 0.2) / 3)


def test_with_a_second_tier_the_cold_start_ttl_is_at_most_the_gain() -> None:
    # No durations yet: the default TTL (2 s), but with a tier a pin longer than the load it saves can only
    # lose, so it is cut to the gain: 1,000 tokens loaded back at 1e-5 s each -> 0.01 s.
    est, _ = make(reload_cost=ReloadCostModel(0.0, 1e-4, 0.0), default_ttl=2.0)
    assert est.ttl("bash:f", 1000, 1) == 2.0
    est.set_tier_reload_cost(ReloadCostModel(0.0, 1e-5, 0.0))
    assert est.ttl("bash:f", 1000, 1) == pytest.approx(0.01)
    est.set_tier_reload_cost(ReloadCostModel(0.0, 1.0, 0.0))  # a slow tier: the load never beats recompute (0.1 s)
    assert est.ttl("bash:f", 1000, 1) == pytest.approx(0.1)
