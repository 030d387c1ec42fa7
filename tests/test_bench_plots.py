"""Every benchmark plot writes a non-empty PNG from a small synthetic payload (the JSON its benchmark
writes), and ``bench timeline`` turns a small scheduler trace into a table, a JSON and a PNG."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import plots, plots_perf

pytestmark = pytest.mark.core

_JCT_ROW = {"mean_jct_s": 4.0, "p90_jct_s": 6.0, "jcts_s": [2.0, 4.0, 6.0],
            "pins": {"pinned_block_seconds": 3.5}}

PAYLOADS: dict[str, tuple[Callable[[dict[str, Any], Path], Path], dict[str, Any]]] = {
    "jct": (plots.plot_jct, {"config": {"policies": ["fcfs", "continuum"]},
                             "policies": {"continuum": _JCT_ROW, "fcfs": {**_JCT_ROW, "mean_jct_s": 8.0}}}),
    "jct_load": (plots.plot_load, {"loads": [{"jps": 0.1, "policies": {"fcfs": _JCT_ROW}},
                                             {"jps": 0.2, "policies": {"fcfs": {"mean_jct_s": 9.0}}}]}),
    "ttl_sweep": (plots.plot_sweep, {"settings": {"continuum-fixed@1": _JCT_ROW, "continuum": _JCT_ROW},
                                     "best": "continuum"}),
    "throughput": (plots_perf.plot_throughput, {"tok_s": {"agent-engine": 120.0, "transformers": 50.0,
                                                          "vllm-cpu": None}, "num_prompts": 4}),
    "scheduler": (plots_perf.plot_scheduler, {"results": {
        f"{p}@{n}": {"policy": p, "num_running": n, "us_per_step": n * 2.0 + k}
        for k, p in enumerate(("fcfs", "continuum")) for n in (64, 256)}, "target_us_at_256": 1000.0}),
    "serve": (plots_perf.plot_serve, {"results": [{"server": "agent-engine", "levels": [
        {"concurrency": c, "tokens_per_s": 10.0 * c, "ttft_mean_s": 0.01 * c, "ttft_p90_s": 0.02 * c}
        for c in (1, 8)]}]}),
    "sim_slices": (plots_perf.plot_sim_slices, {"rows": [
        {"policy": "continuum", "cap": 0.5, "soft_pins": True, "excess_removed": 0.8}]}),
    "sim_validate": (plots_perf.plot_sim_validate, {"results": {
        "fcfs": {"measured_mean_jct_s": 10.0, "simulated_mean_jct_s": 11.0}}, "target_rel_error": 0.2}),
}


def _is_png(p: Path) -> bool:
    return p.stat().st_size > 1000 and p.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_plot_writes_png(name: str, tmp_path: Path) -> None:
    fn, payload = PAYLOADS[name]
    out = fn(payload, tmp_path / "sub" / f"{name}.png")
    assert out == tmp_path / "sub" / f"{name}.png" and _is_png(out)


def test_generic_bar_plot(tmp_path: Path) -> None:
    assert _is_png(plots.plot_bars(tmp_path / "b.png", "t", {"fcfs": 1.0, "continuum": 2.0}, "s"))


def _write_sched_trace(path: Path) -> None:
    events = [{"event": "step", "t": 10.0 + i, "running": i, "waiting": 2 - i % 2, "blocks_in_use": 8,
               "blocks_pinned": 2, "blocks_soft": 1, "blocks_cached_free": 3, "blocks_empty": 5,
               "preempted": ["r1"] if i == 2 else []} for i in range(4)]
    events += [{"event": "admit", "t": 10.5, "hit_tokens": 32, "prompt_tokens": 64, "resumed": False},
               {"event": "admit", "t": 12.5, "hit_tokens": 64, "prompt_tokens": 64, "resumed": True},
               {"event": "other", "t": 11.0}]
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n{torn", encoding="utf-8")


def test_timeline_plot_summary_and_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.sched_timeline import main, plot_timeline, read_sched_trace, summarize

    trace = tmp_path / "sched.jsonl"
    _write_sched_trace(trace)
    steps, admits = read_sched_trace(trace)
    assert (len(steps), len(admits)) == (4, 2)
    s = summarize(steps, admits)
    assert (s["preemptions"], s["resumed"], s["span_s"], s["peak_running"]) == (1, 1, 3.0, 3)
    assert s["mean_prefix_hit"] == 0.75
    assert _is_png(plot_timeline(trace, tmp_path / "t.png"))
    out_json, out_png = tmp_path / "o.json", tmp_path / "o.png"
    assert main([str(trace), "--plot", str(out_png), "--json", str(out_json)]) == 0
    assert _is_png(out_png) and json.loads(out_json.read_text())["steps"] == 4
    assert "preemptions" in capsys.readouterr().out
