"""The learned duration model: beats the per-tool mean on held-out jobs; feeds the paper's argmax."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from estimator import Estimator, EstimatorConfig, QuantileDurationModel, ReloadCostModel, TTLRequest
from estimator.cli import fit_main, holdout_mae
from estimator.traces import default_trace_path, read_trace
from estimator.ttl_learned import request_features, trace_dataset
from scheduler.clock import FakeClock

TRACE = default_trace_path()


def synthetic_trace(path: Path, jobs: int = 30, turns: int = 12, seed: int = 0) -> Path:
    """Jobs alternating a fast tool (0.2-0.4 s) and a slow one (3-6 s)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for j in range(jobs):
            ts = []
            for i in range(turns):
                slow = i % 3 == 2
                secs = float(rng.uniform(3, 6) if slow else rng.uniform(0.2, 0.4))
                ts.append({"prompt_tokens": 1000 + 300 * i, "output_tokens": 50,
                           "tool_name": "bash:pip" if slow else "bash:grep",
                           "tool_seconds": None if i == turns - 1 else secs})
            f.write(json.dumps({"job_id": f"job{j}", "turns": ts}) + "\n")
    return path


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> QuantileDurationModel:
    trace = synthetic_trace(tmp_path_factory.mktemp("tr") / "t.jsonl")
    tools, x, y, _ = trace_dataset(read_trace(trace))
    return QuantileDurationModel(max_iter=30).fit(tools, x, y)


@pytest.mark.skipif(TRACE is None, reason="shared trace not found (set AGENT_ENGINE_TRACES)")
def test_learned_beats_per_tool_mean_on_held_out_jobs() -> None:
    r = holdout_mae(str(TRACE), fraction=0.3)
    print(f"\nheld-out turns {int(r['test_turns'])} (train {int(r['train_turns'])}): "
          f"learned median MAE {r['learned_mae']:.4f} s, per-tool mean MAE {r['tool_mean_mae']:.4f} s")
    assert r["test_turns"] > 1000
    assert r["learned_mae"] < r["tool_mean_mae"]


def test_trace_dataset_uses_only_earlier_turns(tmp_path: Path) -> None:
    turns = read_trace(synthetic_trace(tmp_path / "t.jsonl", jobs=2, turns=4))
    tools, x, y, jobs = trace_dataset(turns)
    assert len(y) == 6 and jobs[:3] == ["job0"] * 3  # the last turn of each job has no duration
    assert math.isnan(x[0, 3]) and math.isnan(x[3, 3])  # no previous duration at a job's first turn
    assert x[1, 3] == pytest.approx(math.log(y[0] + 1e-3))


def test_quantiles_sorted_non_negative_and_roundtrip(small_model: QuantileDurationModel, tmp_path: Path) -> None:
    req = TTLRequest("bash:pip", 4000, 5, job_durations=(0.3, 0.25))
    tool, feats = request_features(req)
    q = small_model.predict_quantiles([tool, "bash:unknown", None], np.array([feats] * 3))
    assert (q >= 0).all() and (np.diff(q, axis=1) >= 0).all()
    assert 2.5 < q[0, 3] < 6.5  # the median of pip lies in its 3-6 s range
    small_model.save(tmp_path / "m.pkl")
    again = QuantileDurationModel.load(tmp_path / "m.pkl")
    assert np.array_equal(again.predict_quantiles([tool], np.array([feats])), q[:1])


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


def test_cli_fit_writes_a_loadable_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = synthetic_trace(tmp_path / "t.jsonl")
    out = tmp_path / "model.pkl"
    assert fit_main([str(trace), "-o", str(out), "--max-iter", "20", "--quantiles", "0.1,0.5,0.9"]) == 0
    assert "held-out MAE" in capsys.readouterr().out
    model = QuantileDurationModel.load(out)
    assert model.quantiles == (0.1, 0.5, 0.9)
    est = Estimator(EstimatorConfig(ttl_policy="learned", learned_model_path=str(out)), clock=FakeClock())
    assert est.snapshot()["learned_model"] == 1
