"""Every benchmark module keeps the ``agent-engine bench`` contract: ``add_arguments`` / ``run`` /
``main``, a light top level, flags with defaults under ``out/``, ``--help`` through the CLI.

Fast: nothing here runs a benchmark beyond a few fake-runner scheduler steps.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_engine.cli.main import main as cli_main
from agent_engine.config import POLICY_NAMES
from benchmarks.cli import BENCHMARKS

pytestmark = pytest.mark.core

# A minimal argv per benchmark and the defaults it must come back with.
MINIMAL: dict[str, tuple[list[str], dict[str, object]]] = {
    "throughput": ([], {"num_prompts": 32, "max_tokens": 64, "vllm_python": None,
                        "json": "out/throughput.json", "plot": "out/throughput.png", "no_progress": False}),
    "scheduler": ([], {"sizes": "64,256,1024", "steps": 200, "policies": "fcfs,continuum",
                       "json": "out/scheduler_overhead.json", "plot": "out/scheduler_overhead.png"}),
    "kernels": ([], {"threads": "1,2", "rows": "1,4,8,16,32,64", "layers": 8, "context": 350,
                     "json": "out/kernels_bench.json"}),
    "serve": ([], {"concurrency": [1, 8, 32], "max_tokens": 32, "vllm_python": None, "budgets": [],
                   "json": "out/serve_load.json", "plot": "out/serve_load.png"}),
    "prompt": ([], {"model": "qwen2.5-coder-1.5b", "lengths": [512, 2048, 8192], "repeats": 3, "llama_server": None,
                    "json": "out/prompt_speed.json"}),
    "budget": ([], {"models": ["embedded", "smollm2"], "repeats": 2, "num_kv_blocks": 80,
                    "json": "out/step_budget.json"}),
    "jct": ([], {"trace": None, "policies": "fcfs,continuum,continuum-fixed,unlimited", "jobs": 16,
                 "jps": None, "concurrency": None, "repeats": 1, "json": "out/jct.json", "plot": "out/jct.png"}),
    "jct-load": ([], {"jps_list": "0.05,0.1,0.2", "json": "out/jct_load.json", "plot": "out/jct_load.png"}),
    "ttl-sweep": ([], {"thresholds": "0.5,1,2,4", "no_paper": False, "json": "out/ttl_sweep.json",
                       "plot": "out/ttl_sweep.png"}),
    "timeline": (["t.jsonl"], {"trace": "t.jsonl", "out": None, "json": None, "title": None}),
    "sim-slices": ([], {"trace": None, "constants": "out/sim_cpu_constants.json", "slices": 6, "jobs": 16,
                        "json": "out/sim_slices.json", "plot": "out/sim_slices.png"}),
    "sim-validate": ([], {"bench_json": "out/jct.json", "constants": "out/sim_cpu_constants.json",
                          "json": "out/sim_validate.json", "plot": "out/sim_validate.png"}),
    "agent-tasks": ([], {"model": "qwen2.5-coder-1.5b", "tasks": "builtin", "policies": "fcfs,continuum", "hints": "job_id,none",
                         "json": "out/agent_tasks.json"}),
    "structured": ([], {"model": None, "requests": 1000, "batch": 16, "companions": 8, "repeats": 3,
                        "json": "out/structured_bench.json"}),
    "quant-parity": ([], {"model": "qwen2.5-coder-1.5b", "max_tokens": 48, "json": "out/quant_parity.json"}),
    "graphs": ([], {"model": None, "dtype": "bfloat16", "streams": "1,64,256", "max_tokens": 128, "repeats": 2,
                    "json": "out/decode_graphs.json"}),
    "stack": ([], {"models": "smollm2,qwen2.5-coder-1.5b", "streams": "1,8", "prompt_len": 64, "max_tokens": 64,
                   "repeats": 3, "pages": False, "json": "out/layer_stack.json"}),
    "onednn-layout": ([], {"shapes": "1152x896,896x896,9728x896,896x4864", "dtypes": "float32,bfloat16",
                           "rows": "1,32,256,1024", "repeats": 7, "threads": 0, "json": "out/onednn_layout.json"}),
    "tile-routes": ([], {"rows": "32,256,1024", "threads": 0, "repeats": 3, "json": "out/tile_routes.json"}),
    "localization": ([], {"tasks": "libraries,suites", "timeout": 600.0, "json": "out/localization.json"}),
    "mutants": ([], {"tasks": "libraries,suites", "mutants": 300, "functions": 4, "timeout": 120.0, "only": "",
                     "json": "out/mutation_repair.json"}),
    "injected": ([], {"tasks": "libraries,suites", "bugs": 2, "seed": 0, "mutants": 300, "functions": 4,
                      "base_url": "", "rewrites": 4, "only": "", "out_dir": "out/injected",
                      "json": "out/injected_repair.json"}),
    "reliability": ([], {"policies": "fcfs,priority,continuum,continuum-fixed", "jobs": 12, "turns": 6,
                         "sigterm_after": 40, "json": "out/reliability.json"}),
}


def test_every_benchmark_has_a_minimal_argv() -> None:
    assert set(MINIMAL) == set(BENCHMARKS)


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_module_contract_and_defaults(name: str) -> None:
    mod = importlib.import_module(BENCHMARKS[name])
    for attr in ("add_arguments", "run", "main"):
        assert callable(getattr(mod, attr)), (name, attr)
    parser = argparse.ArgumentParser()
    assert mod.add_arguments(parser) is None
    argv, defaults = MINIMAL[name]
    args = parser.parse_args(argv)
    assert {k: getattr(args, k) for k in defaults} == defaults


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_bench_help_through_the_cli_exits_zero(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["bench", name, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("usage: agent-engine bench " + name)


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_bench_dispatch_parses_flags(name: str) -> None:
    from benchmarks.cli import add_arguments

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args([name, *MINIMAL[name][0]])
    assert args.bench == name and args.func is importlib.import_module(BENCHMARKS[name]).run


def test_benchmark_modules_import_no_torch() -> None:
    modules = list(BENCHMARKS.values()) + ["benchmarks.cli", "benchmarks.demo"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print('HEAVY', [m for m in ('torch', 'transformers') if m in sys.modules])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout


def test_policy_names_come_from_the_config() -> None:
    from benchmarks.jct_config import bench_policy_names, policy_engine_args

    names = bench_policy_names()
    assert set(POLICY_NAMES) <= set(names) and "unlimited" in names
    for n in names:
        assert policy_engine_args(n)[:2] in (["--policy", "fcfs"], ["--policy", n], ["--policy", "continuum"])
    assert policy_engine_args("continuum-fixed")[-2:] == ["--pin-threshold", "2"]
    assert policy_engine_args("continuum")[-2:] == ["--ttl-policy", "paper"]
    for bad in ("fcfs@2", "continuum@1", "continuum-fixed@x", "continuum-paper"):
        with pytest.raises(ValueError):
            policy_engine_args(bad)


def test_scheduler_benchmark_tiny_run(tmp_path: Path) -> None:
    from benchmarks.scheduler_overhead import main, parse_policies

    with pytest.raises(ValueError):
        parse_policies("fcfs,nope")
    out_json, out_png = tmp_path / "s.json", tmp_path / "s.png"
    assert main(["--sizes", "4,8", "--steps", "3", "--policies", "fcfs,continuum", "--json", str(out_json),
                 "--plot", str(out_png), "--no-progress", "--breakdown"]) == 0
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    payload = json.loads(out_json.read_text())
    assert all(r["us_schedule"] > 0 and r["us_update"] > 0 for r in payload["results"].values())
    parts = payload["breakdown"]["us"]  # every variant of update was timed at the largest size
    assert payload["breakdown"]["num_running"] == 8 and len(parts) == 6 and min(parts.values()) > 0


def test_serve_budgets_and_weight_forms_name_one_server_each() -> None:
    from benchmarks.serve_load import _our_servers, add_arguments, engine_flags, turn_order

    assert _our_servers([], ["native"]) == {"agent-engine": (None, "native")}
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args(["--model", "m", "--budgets", "256,2048"])
    assert args.budgets == [256, 2048] and "--max-num-batched-tokens" not in engine_flags(args, None)
    assert engine_flags(args, 256)[-2:] == ["--max-num-batched-tokens", "256"]
    assert engine_flags(args, None)[4:6] == ["--dtype", "float32"]
    assert engine_flags(ap.parse_args(["--dtype", "bfloat16"]), None)[4:6] == ["--dtype", "bfloat16"]
    flags = engine_flags(args, None)
    assert flags[flags.index("--device") + 1] == "auto"
    on_gpu = engine_flags(ap.parse_args(["--device", "cuda"]), None)
    assert on_gpu[on_gpu.index("--device") + 1] == "cuda"
    servers = {"a": 1, "b": 2, "c": 3}
    assert [[name for name, _ in turn_order(servers, r)] for r in range(4)] == [  # type: ignore[arg-type]
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert _our_servers([256, 2048], ["native"]) == {"agent-engine@256": (256, "native"),
                                                    "agent-engine@2048": (2048, "native")}
    assert list(_our_servers([], ["native", "float32"])) == ["agent-engine+native", "agent-engine+float32"]
    args.model_spec, args.model = "qwen2.5-coder-0.5b", "/cache/Qwen"  # native serves the file, float32 the folder
    assert engine_flags(args, None, "native")[:4] == ["--model", "qwen2.5-coder-0.5b", "--gguf-weights", "native"]
    assert engine_flags(args, None, "float32")[:4] == ["--model", "/cache/Qwen", "--gguf-weights", "float32"]
    assert _our_servers([0, 256], ["native"]) == {"agent-engine@measured": (0, "native"),  # 0: measured on the CPU
                                                 "agent-engine@256": (256, "native")}
    with pytest.raises(ValueError, match="budgets"):
        _our_servers([-1], ["native"])
    with pytest.raises(ValueError, match="gguf-weights"):
        _our_servers([], ["int4"])
    from benchmarks.serve_load import run

    for bad, match in ((["--settle", "-1"], "settle"), (["--repeats", "0"], "repeats")):
        with pytest.raises(ValueError, match=match):  # before any server starts
            run(ap.parse_args(["--model", "m", *bad]))


def test_sim_validate_compare() -> None:
    from benchmarks.sim_validate import SIMULATED, compare

    assert {"fcfs", "continuum", "continuum-fixed"} <= set(SIMULATED)
    res = compare({"fcfs": 10.0, "continuum": 5.0}, {"fcfs": 11.0, "continuum": 7.0})
    assert res["fcfs"]["pass"] is True and abs(res["fcfs"]["rel_error"] - 0.1) < 1e-9
    assert res["continuum"]["pass"] is False
