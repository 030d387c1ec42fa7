"""The GPU-scale simulator: cost model arithmetic, determinism, exact JCT of a lone job, calibration."""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys

import pytest

from agent_engine.sim.calibrate import SMALL_SHAPES, errors, fit
from agent_engine.sim.cli import ratio_at_2x_unloaded, add_arguments
from agent_engine.sim.cost_model import CostConstants, CostModel, kv_pool_blocks
from agent_engine.sim.simulator import SimConfig, _SimRequest, simulate
from agent_engine.sim.specs import get_gpu, get_model
from agent_engine.workloads.traces.format import TraceJob, TraceTurn
from scheduler import Request, SamplingParams

H100_8B = CostModel(get_model("llama-3.1-8b"), CostConstants.from_gpu(get_gpu("h100")))


def _jobs(n: int = 4, turns: int = 4) -> list[TraceJob]:
    out = []
    for j in range(n):
        ts, prompt = [], 200 + 37 * j
        for t in range(turns):
            out_toks = 5 + 3 * ((j + t) % 4)
            last = t == turns - 1
            tool = ["bash:ls", "bash:pytest", "bash:grep"][(j + t) % 3]
            ts.append(TraceTurn(prompt, out_toks, tool_name=tool, tool_seconds=None if last else 0.5 + 0.25 * t))
            prompt += out_toks + 40 + 11 * t
        out.append(TraceJob(f"job{j}", ts))
    return out


def _cfg(policy: str, **kw: object) -> SimConfig:
    base: dict[str, object] = {"policy": policy, "num_blocks": 200, "max_model_len": 2048, "max_num_seqs": 8,
                               "max_num_batched_tokens": 256, "jps": 2.0}
    base.update(kw)
    return SimConfig(**base)  # type: ignore[arg-type]


# ---- cost model ----------------------------------------------------------------------------------
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
def test_inherited_hashes_equal_fresh_hashes() -> None:
    sp = SamplingParams(max_tokens=4)
    prev = Request("a", list(range(50)), sp, block_size=16, arrival_time=0.0)
    for t in (7, 7, 7):
        prev.append_output_token(t)
    prompt = prev.all_token_ids + [100] * 30
    fresh = Request("b", prompt, sp, block_size=16, arrival_time=0.0)
    fast = _SimRequest("c", prompt, sp, block_size=16, arrival_time=0.0, inherited_hashes=prev.block_hashes)
    assert fast.block_hashes == fresh.block_hashes


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


def test_load_and_policies_behave() -> None:
    jobs = _jobs(8, turns=6)
    tight = {"num_blocks": 80, "max_model_len": 1024}
    light = simulate(jobs, H100_8B, _cfg("fcfs", jps=0.01)).summary()
    heavy = simulate(jobs, H100_8B, _cfg("fcfs", jps=100.0, **tight)).summary()
    assert heavy["mean_jct_s"] > light["mean_jct_s"]
    cont = simulate(jobs, H100_8B, _cfg("continuum", jps=100.0, **tight)).summary()
    assert cont["pins"]["created"] > 0
    assert cont["jobs"] == heavy["jobs"] == 8


def test_ratio_at_2x_unloaded() -> None:
    sweep = {"fcfs": [{"jps": 1.0, "mean_jct_s": 150.0}, {"jps": 2.0, "mean_jct_s": 250.0}],
             "continuum": [{"jps": 1.0, "mean_jct_s": 110.0}, {"jps": 2.0, "mean_jct_s": 130.0}]}
    r = ratio_at_2x_unloaded(sweep, 100.0)
    assert r["jps"] == pytest.approx(1.5)
    assert r["continuum"]["mean_jct_s"] == pytest.approx(120.0)
    assert r["continuum"]["fcfs_over_policy"] == pytest.approx(200.0 / 120.0)


def test_cli_parses() -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    a = ap.parse_args(["--gpu", "h200", "--jps-list", "0.1,0.2"])
    assert a.gpu == "h200" and a.jps_list == "0.1,0.2"
    b = ap.parse_args(["calibrate", "--shapes", "small"])
    assert b.shapes == "small"


def test_sim_imports_no_torch() -> None:
    code = ("import sys, agent_engine.sim.cli, agent_engine.sim.simulator, agent_engine.sim.calibrate; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_calibration_error_on_small_shapes() -> None:
    from agent_engine.sim.calibrate import measure

    samples = measure(SMALL_SHAPES, decode_steps=3, mixed_steps=2)
    m = get_model("default")
    errs = errors(CostModel(m, fit(m, samples)), samples)
    med = statistics.median(abs(e) for e in errs)
    print(f"calibration: {len(samples)} steps, median |error| {med:.1%} (target 15%: `agent-engine sim calibrate`)")
    # The 15% target is a benchmark verdict (printed by `sim calibrate`), not a timed-test assertion:
    # step times on a shared 2-core machine are noisy. Here: the fit is sane and reported.
    assert all(e == e for e in errs) and med < 0.5
