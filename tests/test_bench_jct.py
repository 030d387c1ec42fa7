"""The JCT benchmark end to end against real server subprocesses (127.0.0.1), and the pin at work.

Timings are never asserted: the benchmark's acceptance checks are computed and printed, not tested.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from agent_engine.server.launcher import parse_prometheus, scrape_metrics, start_engine_server
from agent_engine.sim.regime import PrefillCurve
from agent_engine.workloads.replay.client import ReplayOptions, replay_sync
from agent_engine.workloads.traces.format import TraceJob, TraceTurn
from benchmarks.jct import main
from benchmarks.jct_config import (
    MATCHABLE,
    JCTConfig,
    PolicyRun,
    add_jct_args,
    config_from_args,
    policy_engine_args,
)
from benchmarks.jct_regime import probe_lengths, settle_regime
from benchmarks.jct_report import checks_per_round, compute_checks
from benchmarks.jct_runner import merge_rounds
from benchmarks.sched_timeline import plot_timeline

ROW_KEYS = {"mean_jct_s", "p50_jct_s", "p90_jct_s", "p99_jct_s", "jobs_per_min", "mean_queue_s",
            "prefix_hit_ratio", "prefill_tokens", "preemptions", "excess_over_unlimited_s", "pins"}


@pytest.mark.core
def test_checks_skip_missing_policies() -> None:
    rows = {"fcfs": {"mean_jct_s": 10.0}, "continuum": {"mean_jct_s": 5.0}, "unlimited": {"mean_jct_s": 4.0}}
    c = compute_checks(rows)
    assert c["continuum_vs_fcfs"]["pass"] is True and c["continuum_vs_fcfs"]["value"] == 0.5
    assert c["excess_removed"]["pass"] is True and abs(c["excess_removed"]["value"] - 5 / 6) < 1e-9
    assert c["paper_vs_fixed"]["pass"] is None  # continuum-fixed did not run: SKIP, never PASS


@pytest.mark.core
def test_rounds_merge_into_means_and_checks_per_round() -> None:
    def run(name: str, mean: float, jcts: list[float], created: int) -> PolicyRun:
        return PolicyRun(name, {"mean_jct_s": mean, "prefill_tokens": 100 * mean, "pins": {"created": created},
                                "jobs_failed": 0, "error": None}, jcts)

    merged = merge_rounds([run("c", 2.0, [1.0, 3.0], 4), run("c", 4.0, [3.0, 5.0], 6)])
    assert merged.row["mean_jct_s"] == 3.0 and merged.row["rounds_mean_jct_s"] == [2.0, 4.0]
    assert merged.row["prefill_tokens"] == 300.0 and merged.row["pins"] == {"created": 5.0}
    assert merged.jcts == [1.0, 3.0, 3.0, 5.0] and merged.row["p50_jct_s"] == 3.0
    single = run("c", 2.0, [2.0], 1)
    assert merge_rounds([single]) is single
    rows = {"fcfs": {"rounds_mean_jct_s": [10.0, 12.0]}, "continuum": {"rounds_mean_jct_s": [5.0, 8.0]},
            "unlimited": {"rounds_mean_jct_s": [4.0, 4.0]}}
    per = checks_per_round(rows)
    assert [c["continuum_vs_fcfs"]["pass"] for c in per] == [True, False]  # 0.5, then 0.667
    assert checks_per_round({"fcfs": {"mean_jct_s": 1.0}}) == []


@pytest.mark.core
def test_policy_args_and_prometheus_parsing() -> None:
    assert policy_engine_args("continuum-fixed@0.5")[-2:] == ["--pin-threshold", "0.5"]
    with pytest.raises(ValueError):
        policy_engine_args("nope")
    text = ('# HELP x\nagent_engine_preemptions_total 3.0\nvllm:num_preemptions_total{engine="0"} 2.0\n'
            'vllm:num_preemptions_total{engine="1",m="a b"} 1.0\nh_bucket{le="1.0"} 5.0\n')
    assert parse_prometheus(text) == {"agent_engine_preemptions_total": 3.0, "vllm:num_preemptions_total": 3.0}


@pytest.mark.slow
def test_bench_jct_tiny_run_writes_json_and_png(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "jct.json", tmp_path / "jct.png"
    rc = main(["--trace", "synth:swe", "--policies", "fcfs,continuum", "--jobs", "2", "--max-turns", "3",
               "--token-scale", "0.02", "--num-kv-blocks", "64", "--block-size", "16", "--max-model-len", "1008",
               "--concurrency", "2", "--time-scale", "0.5", "--log-dir", str(tmp_path / "logs"),
               "--json", str(out_json), "--plot", str(out_png), "--no-progress"])
    assert rc == 0
    data = json.loads(out_json.read_text())
    assert set(data) == {"policies", "config", "checks", "checks_per_round"}
    assert data["checks_per_round"] == []  # a single round
    regime = data["config"]["regime"]  # measured and printed even when every knob is given
    assert regime["chosen"] == {} and regime["run"]["reprefill_s"] > 0 and regime["reference"]["ratio"] > 0
    assert data["config"]["match"] == []  # every knob given
    assert set(data["policies"]) == {"fcfs", "continuum"}
    for row in data["policies"].values():
        assert ROW_KEYS <= set(row)
        assert row["jobs_completed"] == 2 and row["jobs_failed"] == 0
        assert row["mean_jct_s"] > 0 and row["preemptions"] is not None
    assert data["policies"]["continuum"]["pins"]["created"] >= 1
    assert {"continuum_vs_fcfs", "excess_removed", "paper_vs_fixed"} <= set(data["checks"])
    assert out_png.stat().st_size > 1000 and out_png.read_bytes()[:4] == b"\x89PNG"


def _job(job_id: str, prompts: list[int], outputs: list[int], sleeps: list[float]) -> TraceJob:
    turns = [TraceTurn(prompt_tokens=p, output_tokens=o, tool_name="bash:ls",
                       tool_seconds=sleeps[i] if i < len(prompts) - 1 else None)
             for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
    return TraceJob(job_id=job_id, turns=turns, meta={})


@pytest.mark.slow
def test_continuum_pin_keeps_the_previous_turn_cached(tmp_path: Path) -> None:
    """Job A sleeps between turns while G finishes and F grows; A's next turn hits all its full blocks.

    The pool (79 usable blocks of 16) makes F's second turn evict cached blocks; under LRU A's turn-0
    blocks are the oldest free ones, so only the pin keeps them (G's blocks go instead).
    """
    bs = 16
    jobs = [
        _job("A", [320, 480], [8, 8], [3.0]),
        _job("G", [480], [16], []),
        _job("F", [300, 600], [24, 8], [0.5]),
    ]
    trace = tmp_path / "sched.jsonl"
    args = [*policy_engine_args("continuum-fixed@6"), "--num-kv-blocks", "80", "--block-size", str(bs),
            "--max-model-len", "1024", "--max-pinned-fraction", "0.6", "--sched-trace", str(trace)]
    with start_engine_server(args, tmp_path / "server.log") as srv:
        result = replay_sync(srv.base_url, jobs, ReplayOptions(concurrency=3, seed=1, progress=False))
        metrics = scrape_metrics(srv.base_url)
    assert result.summary["jobs_failed"] == 0, result.summary
    by_job: dict[str, list] = {}
    for t in result.turns:
        by_job.setdefault(t.job_id, []).append(t)
    for turns in by_job.values():
        turns.sort(key=lambda t: t.turn)
        for prev, nxt in zip(turns, turns[1:], strict=False):
            full = (prev.prompt_tokens // bs) * bs
            assert nxt.cached_tokens is not None and nxt.cached_tokens >= full, (prev, nxt)
    assert metrics.get("agent_engine_pins_hit_total", 0) >= 2  # A and F came back to their pins
    png = plot_timeline(trace, tmp_path / "timeline.png")
    assert png.stat().st_size > 1000


@pytest.mark.core
def test_bench_command_parses_every_benchmarks_flags() -> None:
    import argparse

    from benchmarks.cli import add_arguments

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    a = ap.parse_args(["jct", "--policies", "fcfs,continuum", "--jobs", "2", "--jps", "0.5"])
    assert a.jobs == 2 and a.jps == 0.5 and a.json == "out/jct.json" and callable(a.func)
    a = ap.parse_args(["jct-load", "--jps-list", "0.1,0.2"])
    assert a.jps_list == "0.1,0.2" and callable(a.func)
    a = ap.parse_args(["ttl-sweep", "--thresholds", "1,2"])
    assert a.thresholds == "1,2" and callable(a.func)
    a = ap.parse_args(["timeline", "x.jsonl", "-o", "y.png"])
    assert a.trace == "x.jsonl" and a.out == "y.png"
    a = ap.parse_args(["throughput", "--num-prompts", "4", "--max-tokens", "8"])
    assert (a.num_prompts, a.max_tokens, a.json) == (4, 8, "out/throughput.json")
    a = ap.parse_args(["scheduler", "--sizes", "16,32", "--steps", "5"])
    assert (a.sizes, a.steps, a.plot) == ("16,32", 5, "out/scheduler_overhead.png")
    a = ap.parse_args(["serve", "--concurrency", "1,2"])
    assert a.concurrency == [1, 2] and a.plot == "out/serve_load.png"


@pytest.mark.core
def test_sweep_names_and_best_setting() -> None:
    from benchmarks.ttl_sweep import best_setting, sweep_policies

    assert sweep_policies([0.5, 2]) == ["continuum-fixed@0.5", "continuum-fixed@2", "continuum",
                                        "continuum-learned"]
    rows = {"a": {"mean_jct_s": 5.0, "pins": {"pinned_block_seconds": 9.0}},
            "b": {"mean_jct_s": 5.0, "pins": {"pinned_block_seconds": 3.0}},
            "c": {"mean_jct_s": 1.0, "jobs_failed": 1}}
    assert best_setting(rows) == "b"  # c failed; a and b tie on JCT, b pins less


def test_default_ttl_is_judged_against_the_best_fixed_threshold() -> None:
    from benchmarks.ttl_sweep import default_vs_best_fixed

    rows = {"continuum-fixed@1": {"mean_jct_s": 40.0}, "continuum-fixed@2": {"mean_jct_s": 50.0},
            "continuum-fixed@4": {"mean_jct_s": 10.0, "jobs_failed": 2}, "continuum": {"mean_jct_s": 42.0},
            "continuum-learned": {"mean_jct_s": 30.0}}
    assert default_vs_best_fixed(rows) == pytest.approx(1.05)  # fixed@4 failed; learned is not fixed
    assert default_vs_best_fixed({"continuum": {"mean_jct_s": 1.0}}) is None


def _jct_config(*argv: str) -> JCTConfig:
    p = argparse.ArgumentParser()
    add_jct_args(p)
    return config_from_args(p.parse_args(list(argv)))


@pytest.mark.core
def test_omitted_scales_and_pool_are_left_to_the_regime_and_given_ones_are_kept() -> None:
    assert _jct_config().match == frozenset(MATCHABLE)
    cfg = _jct_config("--token-scale", "0.2", "--num-kv-blocks", "300")
    assert cfg.match == {"time_scale"} and cfg.token_scale == 0.2 and cfg.num_kv_blocks == 300


@pytest.mark.core
def test_settling_the_regime_sets_only_the_open_knobs_and_reports_both_regimes() -> None:
    jobs = [job for k in range(3) for job in (_job(f"a{k}", [1000, 2000, 4000], [100, 100, 100], [1.0, 3.0]),
                                              _job(f"b{k}", [500, 1500], [50, 50], [2.0]))]
    curve = PrefillCurve(((1000, 0.001), (4000, 0.004)))  # fast: the token scale alone cannot reach the reference
    cfg = JCTConfig(jobs=6, concurrency=6, max_turns=None, max_model_len=2048, block_size=16,
                    match=frozenset({"token_scale", "time_scale", "num_kv_blocks"}))
    settled, report = settle_regime(cfg, jobs, curve)
    assert set(report.chosen) == {"token_scale", "time_scale", "num_kv_blocks"}
    assert settled.token_scale < 1 and settled.time_scale < 1
    assert report.run.ratio == pytest.approx(report.reference.ratio, rel=0.02)
    assert report.run.kv_pressure == pytest.approx(report.reference.kv_pressure, rel=0.05)
    line = report.line()
    assert line.startswith("regime: ") and "reference (llama-3.1-8b on one h100" in line
    assert report.to_dict()["chosen"] == report.chosen
    kept, kept_report = settle_regime(replace(cfg, match=frozenset(), num_kv_blocks=100), jobs, curve)
    assert kept_report.chosen == {} and (kept.token_scale, kept.num_kv_blocks) == (cfg.token_scale, 100)
    assert "chosen: as given" in kept_report.line()


@pytest.mark.core
def test_the_probe_times_only_lengths_the_run_can_price() -> None:
    jobs = [_job("a", [300, 900], [20, 20], [1.0])]
    open_scale = JCTConfig(jobs=1, max_model_len=2048, match=frozenset(MATCHABLE))
    assert probe_lengths(open_scale, jobs) == [256, 1024, 2046]  # up to the context limit
    given = JCTConfig(jobs=1, max_model_len=8192, token_scale=1.0, match=frozenset({"num_kv_blocks"}))
    assert probe_lengths(given, jobs) == [256, 1024]  # 1,024 covers the 920-token peak
