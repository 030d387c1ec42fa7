"""Tiny end-to-end runs of the offline throughput and serving-load benchmarks: each prints its table
and writes its JSON and PNG. Timings are never asserted (targets are printed, not tested)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _is_png(p: Path) -> bool:
    return p.stat().st_size > 1000 and p.read_bytes()[:4] == b"\x89PNG"


def test_throughput_tiny_run(tmp_path: Path) -> None:
    from benchmarks.throughput import main

    out_json, out_png = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["--num-prompts", "4", "--min-len", "8", "--max-len", "16", "--max-tokens", "4", "--repeats", "2",
                 "--json", str(out_json), "--plot", str(out_png), "--no-progress"]) == 0
    data = json.loads(out_json.read_text())
    assert set(data["tok_s"]) == {"agent-engine", "transformers"} and data["engine_tok_s"] > 0
    assert len(data["samples"]["agent-engine"]) == 2 and len(data["samples"]["transformers"]) == 1
    assert _is_png(out_png)


def test_serve_load_tiny_run(tmp_path: Path) -> None:
    from benchmarks.serve_load import main

    out_json, out_png = tmp_path / "s.json", tmp_path / "s.png"
    assert main(["--concurrency", "1,2", "--max-tokens", "4", "--prompt-words", "8", "--requests-per-level", "2",
                 "--repeats", "2", "--budgets", "8,64", "--settle", "0",
                 "--log-dir", str(tmp_path / "logs"), "--json", str(out_json), "--plot", str(out_png),
                 "--no-progress"]) == 0
    results = json.loads(out_json.read_text())["results"]
    assert [res["server"] for res in results] == ["agent-engine@8", "agent-engine@64"]
    for res in results:
        assert [lv["concurrency"] for lv in res["levels"]] == [1, 2]
        assert all(lv["generated_tokens"] == 8 and lv["ttft_mean_s"] > 0 for lv in res["levels"])
        assert all(len(lv["runs"]) == 2 and min(r["tokens_per_s"] for r in lv["runs"]) <= lv["tokens_per_s"]
                   for lv in res["levels"])
        one, two = (lv["tokens_per_s"] for lv in res["levels"])  # the rate per stream count, against one stream
        assert res["scaling"] == pytest.approx({"1": 1.0, "2": two / one})
    assert _is_png(out_png)


def test_serve_load_agent_workload_tiny_run(tmp_path: Path) -> None:
    """Agent sessions: every stream runs its turns over the shared prefix, each turn's prompt growing."""
    from benchmarks.serve_load import main

    out_json = tmp_path / "a.json"
    assert main(["--workload", "agent", "--concurrency", "2", "--turns", "3", "--prefix-words", "150",
                 "--obs-words", "10", "--tool-gap", "0.05", "--max-tokens", "4", "--repeats", "1", "--settle", "0",
                 "--max-model-len", "1024", "--log-dir", str(tmp_path / "logs"), "--json", str(out_json),
                 "--plot", "", "--no-progress"]) == 0
    data = json.loads(out_json.read_text())
    assert data["workload"] == "agent" and data["turns"] == 3
    (level,) = data["results"][0]["levels"]
    assert level["requests"] == 6 and level["generated_tokens"] == 24
    assert 0 < level["later_turn_ttft_p50_s"] and level["ttft_p50_s"] > 0


def test_kernels_tiny_run(tmp_path: Path) -> None:
    from benchmarks.kernels_bench import main
    from kernels import load_cpu_ops

    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    out_json = tmp_path / "k.json"
    assert main(["--threads", "1", "--rows", "1,17", "--layers", "1", "--context", "40", "--repeats", "1",
                 "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert [r["rows"] for r in data["linear"]] == [1, 17] and len(data["attention"]) == 2
    assert all(ms > 0 for r in data["linear"] for ms in r["ms"].values())
    from kernels.cpp_build import bf16_products

    assert ("panel_linear_bf16_pairs" in data["linear"][0]["ms"]) == bf16_products()


def test_kernels_attention_pool_grows_with_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """32 requests of ``--context`` keys may need more blocks than the default pool: it grows to hold them."""
    from benchmarks import kernels_bench
    from kernels import load_cpu_ops

    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    monkeypatch.setattr(kernels_bench, "POOL_BLOCKS", 64)  # 32 requests x 3 blocks of 16 need 97 with the null block
    rows = kernels_bench.bench_attention(40, 1)
    assert [r["heads"] for r in rows] == ["8/2", "9/3"] and all(r["ms"]["cpp"] > 0 for r in rows)


def test_kernels_prefill_tiny_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench kernels --prefill``: both output variants and both attention routes, checked equal first."""
    from benchmarks import prefill_bench
    from benchmarks.kernels_bench import main
    from kernels import load_cpu_ops

    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    monkeypatch.setattr(prefill_bench, "PREFILL_ROWS", (24,))
    monkeypatch.setattr(prefill_bench, "ROUTE_CASES", ((2, 20, 0), (1, 8, 40)))
    out_json = tmp_path / "p.json"
    assert main(["--prefill", "--threads", "1", "--layers", "1", "--repeats", "1", "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert [r["rows"] for r in data["outputs"]] == [24] and data["outputs"][0]["fresh_ms"] > 0
    assert [(r["requests"], r["query"], r["context"]) for r in data["routes"]] == [(2, 20, 0), (1, 8, 40)]
    assert all(r["cpp_ms"] > 0 and r["sdpa_ms"] > 0 for r in data["routes"])


def test_layer_stack_tiny_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench stack`` on the embedded model: both modes timed on every set, the stack really run in
    its mode, the same tokens."""
    from benchmarks.layer_stack_bench import main
    from kernels import layer_stack, load_cpu_ops

    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    runs: list[int] = []
    real_run = layer_stack.LayerStack.run
    monkeypatch.setattr(layer_stack.LayerStack, "run", lambda self, *a: (runs.append(1), real_run(self, *a))[1])
    out_json = tmp_path / "s.json"
    assert main(["--models", "embedded", "--streams", "1,3", "--prompt-len", "8", "--max-tokens", "6",
                 "--repeats", "2", "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert data["modes"] == ["stack", "loop"] and [r["streams"] for r in data["results"]] == [1, 3]
    for r in data["results"]:
        assert r["same_tokens"] and all(len(ms) == 2 and min(ms) > 0 for ms in r["step_ms"].values())
    assert runs, "the stack mode never ran the stack"
