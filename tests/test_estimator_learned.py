"""The learned duration model: beats the per-tool mean on held-out jobs; feeds the paper's argmax.

Every data set is built here, seeded, from plain turns that satisfy ``estimator.ToolTurn``.
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from estimator import (
    Estimator,
    EstimatorConfig,
    QuantileDurationModel,
    ReloadCostModel,
    TTLRequest,
    fit_learned_model,
    holdout_mae,
    is_holdout,
    trace_dataset,
)
from estimator.ttl_learned import request_features
from scheduler.clock import FakeClock

pytestmark = pytest.mark.core


@dataclass(frozen=True)
class Turn:
    tool_name: str | None
    tool_seconds: float | None
    prompt_tokens: int
    output_tokens: int = 50


Job = tuple[str, list[Turn]]


def alternating_jobs(jobs: int = 30, turns: int = 12, seed: int = 0) -> list[Job]:
    """Jobs alternating a fast tool (grep, 0.2-0.4 s) and a slow one (pip, 3-6 s); the last turn has no tool."""
    rng = np.random.default_rng(seed)
    out: list[Job] = []
    for j in range(jobs):
        ts = []
        for i in range(turns):
            slow = i % 3 == 2
            secs = float(rng.uniform(3, 6) if slow else rng.uniform(0.2, 0.4))
            ts.append(Turn("bash:pip" if slow else "bash:grep", None if i == turns - 1 else secs, 1000 + 300 * i))
        out.append((f"job{j}", ts))
    return out


TOOL_BASE = {"bash:grep": 0.3, "bash:pytest": 4.0, "bash:pip": 12.0}


def job_speed_jobs(jobs: int = 80, turns: int = 10, seed: int = 1) -> list[Job]:
    """Three tools of distinct lognormal durations, each job scaled by its own speed factor.

    The factor is visible only through the job's earlier durations, which the learned model sees and the
    per-tool mean does not.
    """
    rng = np.random.default_rng(seed)
    tools = list(TOOL_BASE)
    out: list[Job] = []
    for j in range(jobs):
        speed = float(rng.lognormal(0.0, 0.8))
        ts = []
        for i in range(turns):
            tool = tools[int(rng.integers(len(tools)))]
            secs = TOOL_BASE[tool] * speed * float(rng.lognormal(0.0, 0.15))
            ts.append(Turn(tool, None if i == turns - 1 else secs, 800 + 400 * i))
        out.append((f"speed-{j}", ts))
    return out


@pytest.fixture(scope="module")
def small_model() -> QuantileDurationModel:
    tools, x, y, _ = trace_dataset(alternating_jobs())
    return QuantileDurationModel(max_iter=30).fit(tools, x, y)


def test_learned_beats_per_tool_mean_on_held_out_jobs() -> None:
    r = holdout_mae(job_speed_jobs(), fraction=0.3, model=QuantileDurationModel(max_iter=40))
    assert r["train_turns"] + r["test_turns"] == 80 * 9
    assert r["test_turns"] > 100 and r["train_turns"] > r["test_turns"]
    assert math.isfinite(r["learned_mae"]) and math.isfinite(r["tool_mean_mae"])
    assert r["learned_mae"] < 0.95 * r["tool_mean_mae"]


def test_holdout_split_is_by_job_id_and_deterministic() -> None:
    ids = [f"job-{i}" for i in range(2000)]
    assert not any(is_holdout(j, 0.0) for j in ids) and all(is_holdout(j, 1.0) for j in ids)
    share = sum(is_holdout(j, 0.3) for j in ids) / len(ids)
    assert 0.25 < share < 0.35
    assert [is_holdout(j, 0.3) for j in ids] == [is_holdout(j, 0.3) for j in ids]


def test_trace_dataset_uses_only_earlier_turns() -> None:
    tools, x, y, jobs = trace_dataset(alternating_jobs(jobs=2, turns=4))
    assert len(y) == 6 and jobs[:3] == ["job0"] * 3  # the last turn of each job has no duration
    assert math.isnan(x[0, 3]) and math.isnan(x[3, 3])  # no previous duration at a job's first turn
    assert x[1, 3] == pytest.approx(math.log(y[0] + 1e-3))


def test_trace_dataset_normalizes_names_and_counts_every_turn() -> None:
    Plain = namedtuple("Plain", "tool_name tool_seconds prompt_tokens")  # any object with the three names
    turns = [Plain("bash:python3", 1.0, 100), Plain(None, None, 200), Plain("", -0.5, 300), Plain("bash:pip3", 2.0, 0)]
    tools, x, y, jobs = trace_dataset([("a", turns)])
    assert tools == ["bash:python", None, "bash:pip"] and jobs == ["a"] * 3
    assert x[:, 2].tolist() == [0.0, 2.0, 3.0]  # turn_index is the position, unmeasured turns included
    assert y.tolist() == [1.0, 0.0, 2.0]  # negative durations clamp at 0
    assert x[:, 1] == pytest.approx([math.log1p(100), math.log1p(300), 0.0])
    dc = [Turn(t.tool_name, t.tool_seconds, t.prompt_tokens) for t in turns]
    assert np.array_equal(trace_dataset([("a", dc)])[1], x, equal_nan=True)
    empty_tools, empty_x, empty_y, _ = trace_dataset([])
    assert empty_tools == [] and empty_x.shape == (0, 5) and empty_y.shape == (0,)


def test_quantiles_sorted_non_negative_and_roundtrip(small_model: QuantileDurationModel, tmp_path: Path) -> None:
    req = TTLRequest("bash:pip", 4000, 5, job_durations=(0.3, 0.25))
    tool, feats = request_features(req)
    q = small_model.predict_quantiles([tool, "bash:unknown", None], np.array([feats] * 3))
    assert (q >= 0).all() and (np.diff(q, axis=1) >= 0).all()
    assert 2.5 < q[0, 3] < 6.5  # the median of pip lies in its 3-6 s range
    small_model.save(tmp_path / "m.pkl")
    again = QuantileDurationModel.load(tmp_path / "m.pkl")
    assert np.array_equal(again.predict_quantiles([tool], np.array([feats])), q[:1])


def test_predictions_differ_by_tool(small_model: QuantileDurationModel) -> None:
    _, feats = request_features(TTLRequest("bash:grep", 4000, 5, job_durations=(0.3, 4.0)))
    grep, pip = small_model.predict_median(["bash:grep", "bash:pip"], np.array([feats] * 2))
    assert 0.1 < grep < 1.0 < 2.5 < pip


def test_learned_policy_switches_to_tool_cdf_at_k(small_model: QuantileDurationModel) -> None:
    est = Estimator(EstimatorConfig(ttl_policy="learned", learned_refit_every=0), clock=FakeClock(),
                    reload_cost=ReloadCostModel(10.0, 0.0, 0.0), learned_model=small_model)
    # Cold start, but a model is loaded: its distribution for pip (3-6 s) under gain 10 pins for a few s.
    ttl = est.ttl("bash:pip", 4000, 5)
    assert est.learned.last_source == "learned" and 2.5 < ttl < 6.5
    for _ in range(100):
        est.record_turn_finished("j", "bash:pip", 0.0)
        est.record_turn_arrival("j", 8.0)
    assert est.ttl("bash:pip", 4000, 5) == 8.0  # own CDF: P(8) = 1 -> 10 - 8 = 2 > 0
    assert est.learned.last_source == "tool"


def test_learned_without_model_behaves_like_paper() -> None:
    est = Estimator(EstimatorConfig(ttl_policy="learned", default_ttl=3.0, learned_refit_every=0),
                    clock=FakeClock())
    assert est.ttl("bash:ls", 100, 1) == 3.0 and est.learned.last_source == "cold_start"


def test_online_refit(small_model: QuantileDurationModel) -> None:
    est = Estimator(EstimatorConfig(ttl_policy="learned", learned_refit_every=50, learned_refit_in_background=False),
                    clock=FakeClock(), learned_model=small_model)
    for i in range(50):
        est.record_turn_finished("j", "bash:newtool", 0.0, context_tokens=100 * i, turn_index=i,
                                 command="newtool --x")
        est.record_turn_arrival("j", 2.0)
    assert est.learned.refits == 1 and est.snapshot()["learned_refits"] == 1
    model = est.learned.model
    assert model is not small_model and "bash:newtool" in model.vocab
    assert len(model.train_y) == len(small_model.train_y)  # offline base kept, online rows not doubled
    tool, feats = request_features(TTLRequest("bash:newtool", 2000, 20, job_durations=(2.0,) * 5))
    assert 1.0 < model.predict_median([tool], np.array([feats]))[0] < 3.0


def test_fit_learned_model_writes_a_loadable_model(tmp_path: Path) -> None:
    model = fit_learned_model(alternating_jobs(), quantiles=(0.9, 0.1, 0.5), max_iter=20)
    assert model.quantiles == (0.1, 0.5, 0.9) and model.fitted and len(model.train_y) == 30 * 11
    out = tmp_path / "model.pkl"
    model.save(out)
    _, feats = request_features(TTLRequest("bash:grep", 1000, 1))
    again = QuantileDurationModel.load(out)
    assert np.array_equal(again.predict_quantiles(["bash:grep"], np.array([feats])),
                          model.predict_quantiles(["bash:grep"], np.array([feats])))
    est = Estimator(EstimatorConfig(ttl_policy="learned", learned_model_path=str(out)), clock=FakeClock())
    assert est.snapshot()["learned_model"] == 1


def test_fit_needs_ten_measured_turns() -> None:
    with pytest.raises(ValueError):
        fit_learned_model(alternating_jobs(jobs=1, turns=5))
