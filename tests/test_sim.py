"""The GPU-scale simulator: cost model arithmetic, engine options, determinism, exact JCT of a lone job,
sweeps, the ``sim`` command and calibration."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from agent_engine.cli.main import main as cli_main
from agent_engine.config import EngineConfig
from agent_engine.sim.calibrate import SMALL_SHAPES, errors, fit, simulate_like_bench
from agent_engine.sim.cli import TIER_FORM, add_arguments, build_cost_model, engine_options, resolve_pool
from agent_engine.sim.cost_model import CostConstants, CostModel, kv_pool_blocks
from agent_engine.sim.policy_label import POLICIES, PolicyLabel, engine_for_policy, parse_label, policy_label
from agent_engine.sim.sim_config import SimConfig
from agent_engine.sim.simulator import simulate
from agent_engine.sim.specs import get_gpu, get_model
from agent_engine.sim.sweep import ratio_at_2x_unloaded, run_sweep
from agent_engine.sim.turns import SimRequest
from agent_engine.workloads.traces import load_trace
from agent_engine.workloads.traces.format import TraceJob, TraceTurn
from scheduler import FakeRunner, Request, SamplingParams, Scheduler, SchedulerConfig
from scheduler.tier_copy import tier_blocks

H100_8B = CostModel(get_model("llama-3.1-8b"), CostConstants.from_gpu(get_gpu("h100")))


def _jobs(n: int = 4, turns: int = 4) -> list[TraceJob]:
    out = []
    for j in range(n):
        ts, prompt = [], 200 + 37 * j
        for t in range(turns):
            out_toks = 5 + 3 * ((j + t) % 4)
            last = t == turns - 1
            tool = ["bash:ls", "bash:pytest", "bash:grep"][(j + t) % 3]
            secs = None if last else 0.5 + 0.25 * t
            ts.append(TraceTurn(prompt, out_toks, tool_name=tool, tool_seconds=secs))
            prompt += out_toks + 40 + 11 * t
        out.append(TraceJob(f"job{j}", ts))
    return out


# Engine options go to the EngineConfig; the pool (num_blocks, max_model_len) and the workload (seed
# included) to SimConfig.
_ENGINE_KEYS = {f.name for f in dataclasses.fields(EngineConfig)} - {"max_model_len", "seed"}
CPU_CONSTS = CostConstants(2e10, 5e9, 8e9, 3e-3, 2e-4, combine="sum")


def _cfg(policy: str, **kw: object) -> SimConfig:
    base: dict[str, object] = {"num_blocks": 200, "max_model_len": 2048, "max_num_seqs": 8,
                               "max_num_batched_tokens": 256, "jps": 2.0}
    base.update(kw)
    engine = EngineConfig(**{k: v for k, v in base.items() if k in _ENGINE_KEYS})  # type: ignore[arg-type]
    rest = {k: v for k, v in base.items() if k not in _ENGINE_KEYS}
    return SimConfig(engine_for_policy(policy, engine), **rest)  # type: ignore[arg-type]


# ---- cost model ----------------------------------------------------------------------------------
@pytest.mark.core
def test_kv_pool_follows_vllm_arithmetic() -> None:
    m, g = get_model("llama-3.1-8b"), get_gpu("h100")
    assert m.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB per token
    assert 7.9e9 < m.num_params < 8.1e9
    tokens = kv_pool_blocks(m, g) * 16
    assert 400_000 < tokens < 480_000  # ~54 GiB of KV after 15 GiB of weights at 0.9 utilization
    assert kv_pool_blocks(m, g, gpu_memory_utilization=0.5) < kv_pool_blocks(m, g)
    big = get_model("llama-3.1-70b")
    with pytest.raises(ValueError):
        kv_pool_blocks(big, g, tp=1)  # 141 GB of weights do not fit one H100
    assert kv_pool_blocks(big, g, tp=4) > 0


@pytest.mark.core
def test_step_time_roofline_and_monotone() -> None:
    c = H100_8B
    decode = c.step_time([(1, 1000, True)])
    m = c.model  # weights read per step: every layer plus the LM head (embedding rows are gathered)
    weights_s = (m.matmul_params + m.vocab_size * m.hidden_size) * 2 / (3.35e12 * 0.8)
    assert decode == pytest.approx(weights_s + 1000 * 131072 / (3.35e12 * 0.8) + 0.0015 + 5e-6, rel=0.02)
    assert c.step_time([(1, 2000, True)]) > decode
    assert c.step_time([(1, 1000, True)] * 8) > decode
    prefill = c.step_time([(8192, 0, True)])
    assert prefill > 10 * decode  # compute bound
    assert c.step_time([]) == 0.0
    tp2 = CostModel(c.model, c.consts, tp=2)
    assert tp2.step_time([(8192, 0, True)]) < prefill  # half the FLOPs plus an all-reduce


@pytest.mark.core
def test_fit_recovers_known_constants() -> None:
    m = get_model("default")
    truth = CostConstants(2e10, 5e9, 8e9, 3e-3, 2e-4, combine="sum")
    cost = CostModel(m, truth)
    shapes = [[(1, c, True)] * d + ([(p, 0, True)] if p else []) for d in (1, 4, 16) for c in (64, 512, 1536)
              for p in (0, 256, 1024)]
    samples = [(ch, cost.step_time(ch)) for ch in shapes]
    fitted = CostModel(m, fit(m, samples))
    assert max(abs(e) for e in errors(fitted, samples)) < 1e-6


# ---- simulator -----------------------------------------------------------------------------------
@pytest.mark.core
def test_inherited_hashes_equal_fresh_hashes() -> None:
    sp = SamplingParams(max_tokens=3, ignore_eos=True)
    prev = Request("a", list(range(50)), sp, block_size=16, arrival_time=0.0)
    sched = Scheduler(SchedulerConfig(num_blocks=16, block_size=16, max_model_len=128))
    sched.add_request(prev)
    runner = FakeRunner(lambda s: 7)
    while sched.has_unfinished_requests():  # three output tokens appended (and hashed) by the scheduler
        out = sched.schedule()
        sched.update(out, runner.execute(out))
    assert prev.output_token_ids == [7, 7, 7] and len(prev.block_hashes) == 53 // 16
    prompt = prev.all_token_ids + [100] * 30
    fresh = Request("b", prompt, sp, block_size=16, arrival_time=0.0)
    fast = SimRequest("c", prompt, sp, block_size=16, arrival_time=0.0, inherited_hashes=prev.block_hashes)
    assert fast.block_hashes == fresh.block_hashes


@pytest.mark.core
@pytest.mark.parametrize("policy", ["fcfs", "continuum", "continuum-fixed"])
def test_deterministic_under_seed(policy: str) -> None:
    jobs = _jobs()
    a = simulate(jobs, H100_8B, _cfg(policy, seed=3)).summary()
    b = simulate(jobs, H100_8B, _cfg(policy, seed=3)).summary()
    c = simulate(jobs, H100_8B, _cfg(policy, seed=4)).summary()
    for s in (a, b, c):
        s.pop("wall_seconds")
    assert a == b
    assert a["jobs"] == 4 and a["mean_jct_s"] > 0
    assert a != c  # another seed, other arrival times


@pytest.mark.core
def test_lone_job_jct_is_steps_plus_tool_waits() -> None:
    job = _jobs(1, turns=5)[0]
    r = simulate([job], H100_8B, _cfg("continuum", max_num_batched_tokens=128), record_steps=True)
    waits = sum(t.tool_seconds or 0.0 for t in job.turns)
    assert r.jcts[0] == pytest.approx(sum(r.step_times) + waits, rel=1e-12)
    # Steps: turn 0 prefills its whole prompt in 128-token chunks, later turns only what the prefix
    # cache (the pinned previous turn) lacks; then one step per generated token but the first.
    expected, cached = 0, 0
    for t in job.turns:
        new = t.prompt_tokens - cached
        expected += math.ceil(new / 128) + t.output_tokens - 1
        cached = (t.prompt_tokens + t.output_tokens - 1) // 16 * 16
    assert r.steps == expected
    assert r.summary()["prefix_hit_ratio"] > 0.5


@pytest.mark.core
def test_load_and_policies_behave() -> None:
    jobs = _jobs(8, turns=6)
    tight = {"num_blocks": 80, "max_model_len": 1024}
    light = simulate(jobs, H100_8B, _cfg("fcfs", jps=0.01)).summary()
    heavy = simulate(jobs, H100_8B, _cfg("fcfs", jps=100.0, **tight)).summary()
    assert heavy["mean_jct_s"] > light["mean_jct_s"]
    cont = simulate(jobs, H100_8B, _cfg("continuum", jps=100.0, **tight)).summary()
    assert cont["pins"]["created"] > 0
    assert cont["jobs"] == heavy["jobs"] == 8


@pytest.mark.core
def test_ratio_at_2x_unloaded() -> None:
    sweep = {"fcfs": [{"jps": 1.0, "mean_jct_s": 150.0}, {"jps": 2.0, "mean_jct_s": 250.0}],
             "continuum": [{"jps": 1.0, "mean_jct_s": 110.0}, {"jps": 2.0, "mean_jct_s": 130.0}]}
    r = ratio_at_2x_unloaded(sweep, 100.0)
    assert r["jps"] == pytest.approx(1.5)
    assert r["continuum"]["mean_jct_s"] == pytest.approx(120.0)
    assert r["continuum"]["fcfs_over_policy"] == pytest.approx(200.0 / 120.0)


@pytest.mark.core
def test_cli_parses() -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    a = ap.parse_args(["--gpu", "h200", "--jps-list", "0.1,0.2"])
    assert a.gpu == "h200" and a.jps_list == "0.1,0.2"
    b = ap.parse_args(["calibrate", "--shapes", "small"])
    assert b.shapes == "small"


@pytest.mark.core
def test_policy_labels_map_onto_engine_options() -> None:
    assert {"fcfs", "continuum", "continuum-fixed", "continuum-learned"} <= set(POLICIES)
    for label in POLICIES:
        assert policy_label(engine_for_policy(label)) == label
        assert str(parse_label(label)) == label and str(parse_label(label + "+tier")) == label + "+tier"
    assert parse_label("fcfs") == PolicyLabel("fcfs", "fixed")
    assert parse_label("continuum") == PolicyLabel("continuum", "paper")
    assert parse_label("continuum-learned+pool") == PolicyLabel("continuum", "learned", memory="pool")
    assert parse_label("continuum-fixed@0.5+tier") == PolicyLabel("continuum", "fixed", 0.5, "tier")
    assert engine_for_policy("continuum-fixed@0.5").pin_threshold == 0.5
    for bad, why in (("continuum-bogus", "unknown policy"), ("continuum+disk", "unknown memory variant"),
                     ("fcfs@2", "only a fixed TTL"), ("continuum@1", "only a fixed TTL"),
                     ("continuum-fixed@x", "must be a number")):
        with pytest.raises(ValueError, match=why):
            parse_label(bad)
    with pytest.raises(ValueError, match="--pin-threshold"):
        SimConfig(EngineConfig(), num_blocks=99, max_model_len=512).for_label("continuum-fixed@0.5", None)
    base = EngineConfig(max_pinned_fraction=0.3, soft_pins=False, soft_pin_grace=1.5, max_num_seqs=7)
    cfg = SimConfig(engine_for_policy("continuum-fixed", base), num_blocks=99, max_model_len=512)
    assert cfg.engine.ttl_policy == "fixed" and cfg.label == "continuum-fixed"
    sc = cfg.scheduler_config()
    assert sc == cfg.engine.scheduler_config(99, 512) and (sc.num_blocks, sc.max_model_len) == (99, 512)
    assert (sc.max_pinned_fraction, sc.soft_pins, sc.soft_pin_grace, sc.max_num_seqs) == (0.3, False, 1.5, 7)


@pytest.mark.core
def test_cli_flags_build_engine_options_and_pool() -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args(["--max-pinned-fraction", "0.3", "--no-soft-pins", "--max-num-seqs", "32",
                          "--soft-pin-grace", "0", "--pin-threshold", "1.5"])
    engine = engine_options(args)
    assert (engine.max_pinned_fraction, engine.soft_pins, engine.soft_pin_grace) == (0.3, False, 0.0)
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.pin_threshold) == (32, 8192, 1.5)
    cost = build_cost_model(args)
    blocks, max_len = resolve_pool(engine, cost, "h100")
    assert blocks == kv_pool_blocks(get_model("llama-3.1-8b"), get_gpu("h100"), max_num_seqs=32)
    assert max_len == 131072
    small = dataclasses.replace(engine, num_kv_blocks=100, max_model_len=1000)
    assert resolve_pool(small, cost, "h100") == (100, 1000)
    assert resolve_pool(dataclasses.replace(engine, max_model_len=None), cost, None) == (8192, 131056)


@pytest.mark.core
def test_the_sim_tier_is_its_bytes_over_one_gpu_share_of_a_pool_block() -> None:
    """The simulated tier holds blocks in the pool's form: ``--kv-offload-bytes // block_bytes``, with a
    fractional share where tp does not divide the KV heads (the count the simulator has always used)."""
    for tp in (1, 2, 3):
        cost = CostModel(get_model("llama-3.1-8b"), CostConstants.from_gpu(get_gpu("h100")), tp)
        for size in (0, 10**9, 512 * 1024**3):
            assert tier_blocks(size, cost.block_shape(16), TIER_FORM) == int(size // cost.block_bytes(16))


@pytest.mark.core
def test_run_sweep_points_and_unloaded() -> None:
    jobs = _jobs(4, turns=3)
    base = _cfg("fcfs", jps=None)
    res = run_sweep(jobs, H100_8B, base, ["fcfs", "continuum"], [5.0, 1.0], workers=1, progress=False)
    assert sorted(res["sweep"]) == ["continuum", "fcfs"]
    for pts in res["sweep"].values():
        assert [p["jps"] for p in pts] == [1.0, 5.0] and all(p["jobs"] == 4 for p in pts)
    lone = simulate(jobs, H100_8B, dataclasses.replace(base, jps=1e-4)).summary()
    assert res["unloaded"]["mean_jct_s"] == pytest.approx(lone["mean_jct_s"])
    cont = simulate(jobs, H100_8B, _cfg("continuum", jps=5.0)).summary()
    assert res["sweep"]["continuum"][1]["mean_jct_s"] == pytest.approx(cont["mean_jct_s"])


@pytest.mark.core
def test_sim_command_writes_default_json_and_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["sim", "--jobs", "3", "--max-turns", "3", "--token-scale", "0.05", "--jps-list", "0.5,2",
            "--workers", "1", "--no-progress", "--num-kv-blocks", "400", "--max-model-len", "4096"]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "mean JCT s" in out and "default (default_trace.jsonl)" in out
    data = json.loads((tmp_path / "out" / "sim_h100_llama-3.1-8b.json").read_text())
    assert (tmp_path / "out" / "sim_h100_llama-3.1-8b.png").stat().st_size > 0
    assert sorted(data["policies"]) == ["continuum", "fcfs"] and data["jps"] == 0.5
    assert [p["jps"] for p in data["sweep"]["fcfs"]] == [0.5, 2.0]
    assert data["setup"]["num_kv_blocks"] == 400 and data["policies"]["fcfs"]["jobs"] == 3


@pytest.mark.core
def test_simulate_like_bench_reads_trace_specs() -> None:
    kw = {"jobs": 2, "max_turns": 3, "token_scale": 0.05, "num_kv_blocks": 80, "max_model_len": 1024}
    by_spec = simulate_like_bench("synth:swe", CPU_CONSTS, ["fcfs", "continuum"], seed=1, **kw)
    by_jobs = simulate_like_bench(load_trace("synth:swe", 2, seed=1), CPU_CONSTS, ["fcfs", "continuum"],
                                  seed=1, **kw)
    for res in (by_spec, by_jobs):
        for summ in res["policies"].values():
            summ.pop("wall_seconds")
    assert by_spec == by_jobs and by_spec["policies"]["fcfs"]["jobs"] == 2
    shifted = simulate_like_bench("default", CPU_CONSTS, ["fcfs"], first_job=1, **kw)
    assert shifted["policies"]["fcfs"]["jobs"] == 2


@pytest.mark.slow
def test_sim_imports_no_torch() -> None:
    code = ("import sys, agent_engine.sim.cli, agent_engine.sim.simulator, agent_engine.sim.calibrate; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; print(bad); "
            "sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_calibration_error_on_small_shapes() -> None:
    from agent_engine.sim.calibrate import measure

    samples = measure(SMALL_SHAPES, decode_steps=3, mixed_steps=2)
    m = get_model("default")
    errs = errors(CostModel(m, fit(m, samples)), samples)
    med = statistics.median(abs(e) for e in errs)
    print(f"calibration: {len(samples)} steps, median |error| {med:.1%} "
          "(target 15%: `agent-engine sim calibrate`)")
    # The 15% target is a benchmark verdict (printed by `sim calibrate`), not a timed-test assertion:
    # step times on a shared 2-core machine are noisy. Here: the fit is sane and reported.
    assert all(e == e for e in errs) and med < 0.5


@pytest.mark.slow
def test_run_sweep_same_in_worker_processes() -> None:
    jobs = _jobs(4, turns=3)
    base = _cfg("fcfs", jps=None)
    args = (jobs, H100_8B, base, ["fcfs", "continuum-fixed"], [1.0, 5.0])
    serial = run_sweep(*args, workers=1, progress=False)
    parallel = run_sweep(*args, workers=2, progress=False)
    for res in (serial, parallel):
        res["unloaded"].pop("wall_seconds")
        for pts in res["sweep"].values():
            for p in pts:
                p.pop("wall_seconds")
    assert serial == parallel

