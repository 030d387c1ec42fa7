"""The simulator benchmarks: ``sim_slices`` (bench jct's setting over disjoint job slices) and ``sim_validate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_engine.sim.cost_model import CostConstants
from agent_engine.workloads.traces.format import write_jobs
from agent_engine.workloads.traces.profile import load_profile
from agent_engine.workloads.traces.synth import synthesize
from benchmarks.sim_slices import main, simulate_slices


@pytest.mark.core
def test_slices_report_ratios_and_excess_removed(tmp_path: Path) -> None:
    trace, consts = tmp_path / "t.jsonl", tmp_path / "c.json"
    write_jobs(trace, synthesize(load_profile("swe"), 8, seed=3))
    CostConstants(2e10, 5e9, 8e9, 3e-3, 2e-4, combine="sum").save(consts)
    kw = dict(slices=3, jobs=4, max_turns=6, token_scale=0.05, num_kv_blocks=24, block_size=16,
              unlimited_blocks=400)
    res = simulate_slices(str(trace), str(consts), ["continuum"], [0.5, 1.0], **kw)
    assert res["slices"] == [0, 1]  # 8 jobs hold two disjoint slices of 4
    assert [(r["policy"], r["cap"]) for r in res["rows"]] == [("continuum", 0.5), ("continuum", 1.0)]
    for r in res["rows"]:
        assert len(r["per_slice_excess_removed"]) == 2 and 0 < r["ratio_vs_fcfs"] < 2
        assert r["worst_excess_removed"] == min(r["per_slice_excess_removed"])
    assert simulate_slices(str(trace), str(consts), ["continuum"], [0.5], **kw) == res | {
        "rows": res["rows"][:1]}  # deterministic
    with pytest.raises(ValueError):
        simulate_slices(str(trace), str(consts), ["continuum"], [0.5], jobs=20)
    out = tmp_path / "s.json"
    main(["--trace", str(trace), "--constants", str(consts), "--policies", "continuum", "--slices", "1",
          "--jobs", "4", "--json", str(out), "--plot", str(tmp_path / "s.png")])
    assert json.loads(out.read_text())["rows"][0]["policy"] == "continuum"


@pytest.mark.core
def test_sim_validate_compares_a_bench_json(tmp_path: Path) -> None:
    from benchmarks.sim_validate import main as validate

    consts, bench, out = tmp_path / "c.json", tmp_path / "jct.json", tmp_path / "v.json"
    CostConstants(2e10, 5e9, 8e9, 3e-3, 2e-4, combine="sum").save(consts)
    config = {"trace": "synth:swe", "jps": None, "jobs": 2, "max_turns": 3, "token_scale": 0.05,
              "time_scale": 1.0, "seed": 0, "num_kv_blocks": 64, "max_num_seqs": 8, "max_model_len": 1008,
              "block_size": 16}
    bench.write_text(json.dumps({"config": config, "policies": {"fcfs": {"mean_jct_s": 5.0},
                                                                "unlimited": {"mean_jct_s": 4.0}}}))
    assert validate(["--bench", str(bench), "--constants", str(consts), "--json", str(out),
                     "--plot", str(tmp_path / "v.png"), "--no-progress"]) == 0
    res = json.loads(out.read_text())["results"]
    assert list(res) == ["fcfs"] and res["fcfs"]["simulated_mean_jct_s"] > 0  # unlimited is not simulated
    assert (tmp_path / "v.png").stat().st_size > 1000
