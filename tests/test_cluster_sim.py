"""The simulator's replicas: one replica is the single-engine simulation, routing changes reuse, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_engine.config import EngineConfig
from agent_engine.sim.cluster import simulate_cluster
from agent_engine.sim.cost_model import CostConstants, CostModel
from agent_engine.sim.sim_config import SimConfig
from agent_engine.sim.simulator import simulate
from agent_engine.sim.specs import get_gpu, get_model
from agent_engine.workloads.traces.source import load_trace

pytestmark = pytest.mark.core

JOBS = 8


@pytest.fixture(scope="module")
def setting() -> tuple[list, CostModel, SimConfig]:  # type: ignore[type-arg]
    jobs = load_trace(None, max_jobs=JOBS, seed=0)
    cost = CostModel(get_model("llama-3.1-8b"), CostConstants.from_gpu(get_gpu("h100")), 1)
    engine = EngineConfig.from_kwargs(policy="continuum", ttl_policy="fixed", pin_threshold=30.0,
                                      max_num_seqs=64, max_num_batched_tokens=2048)
    cfg = SimConfig(engine, num_blocks=1200, max_model_len=8192, jps=0.5, max_jobs=JOBS, max_turns=6,
                    token_scale=0.2, time_scale=0.2)
    return jobs, cost, cfg


def test_one_replica_is_the_single_engine_simulation(setting) -> None:  # type: ignore[no-untyped-def]
    jobs, cost, cfg = setting
    single = simulate(jobs, cost, cfg).summary()
    one = simulate_cluster(jobs, cost, cfg, 1, "affinity").summary()
    assert one["mean_jct_s"] == pytest.approx(single["mean_jct_s"])
    assert one["prefix_hit_ratio"] == pytest.approx(single["prefix_hit_ratio"])
    assert one["replica_turns"] == [one["routing"]["routed"]]


def test_affinity_keeps_next_turn_reuse_that_spreading_loses(setting) -> None:  # type: ignore[no-untyped-def]
    jobs, cost, cfg = setting
    res = {r: simulate_cluster(jobs, cost, cfg, 4, r, seed=1).summary() for r in ("affinity", "pow2", "rr")}
    for r in res.values():
        assert r["jobs"] == JOBS and len(r["replica_turns"]) == 4
        assert sum(r["replica_turns"]) == r["routing"]["routed"]
    assert res["affinity"]["next_turn_reuse"] > 0.9
    assert res["affinity"]["next_turn_reuse"] > res["rr"]["next_turn_reuse"] + 0.3
    assert res["affinity"]["next_turn_reuse"] > res["pow2"]["next_turn_reuse"] + 0.2
    assert res["affinity"]["routing"]["affinity"] > 0 and res["rr"]["routing"]["spread"] > 0
    again = simulate_cluster(jobs, cost, cfg, 4, "pow2", seed=1).summary()
    assert again["mean_jct_s"] == res["pow2"]["mean_jct_s"]  # deterministic


def test_sim_cli_runs_the_cluster_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent_engine.cli.main import main

    out = tmp_path / "cluster.json"
    rc = main(["sim", "--replicas", "2", "--routers", "affinity,rr", "--policies", "continuum-fixed",
               "--jobs", "4", "--max-turns", "3", "--token-scale", "0.05", "--time-scale", "0.1",
               "--jps", "1", "--workers", "1", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["replicas"] == 2 and [p["router"] for p in data["points"]] == ["affinity", "rr"]
    assert "next-turn reuse" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sim", "--replicas", "2", "--routers", "nope", "--jobs", "1"])
