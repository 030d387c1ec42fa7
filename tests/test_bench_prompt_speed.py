"""``bench prompt``: fresh prompts of the asked length, the best run per server, ratios in one run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import prompt_speed
from benchmarks.prompt_speed import LLAMA, _rows, prompt_text

pytestmark = pytest.mark.core


def test_prompts_are_fresh_and_about_the_asked_length() -> None:
    a, b = prompt_text(512, "agent-engine 512 0 1"), prompt_text(512, "agent-engine 512 0 2")
    assert a.splitlines()[0] != b.splitlines()[0]  # no shared first block: no cached prefix
    assert 480 <= len(a.split()) <= 512


def test_rows_hold_each_servers_best_and_the_ratio() -> None:
    best = {("agent-engine", 512): {"prompt_tps": 200.0}, (LLAMA, 512): {"prompt_tps": 100.0}}
    assert _rows(["agent-engine", LLAMA], [512], best)[0]["ratio"] == 2.0
    assert "ratio" not in _rows(["agent-engine"], [512], best)[0]


def test_our_server_runs_on_the_cpu_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-server runs on the CPU (``-ngl 0``): ours does too by default, even where a GPU is."""
    seen: list[list[str]] = []
    monkeypatch.setattr(prompt_speed, "start_engine_server", lambda argv, *a, **k: seen.append(list(argv)))
    ap = argparse.ArgumentParser()
    prompt_speed.add_arguments(ap)
    for flags, device in (([], "cpu"), (["--device", "cuda"], "cuda")):
        args = ap.parse_args(flags)
        prompt_speed._start("agent-engine", args, "m.gguf", 1024)
        assert seen[-1][seen[-1].index("--device") + 1] == device


def test_json_holds_the_lengths_every_server_has_run(tmp_path: Path) -> None:
    """Written after every length, so a run cut short keeps what it measured."""
    import json

    ap = argparse.ArgumentParser()
    prompt_speed.add_arguments(ap)
    args = ap.parse_args(["--lengths", "512,2048", "--json", str(tmp_path / "p.json")])
    best = {("agent-engine", 512): {"prompt_tps": 200.0}, (LLAMA, 512): {"prompt_tps": 100.0},
            ("agent-engine", 2048): {"prompt_tps": 150.0}}
    prompt_speed._write_json(args, ["agent-engine", LLAMA], best, [0.0, 0.0, 0.0], complete=False)
    got = json.loads((tmp_path / "p.json").read_text())
    assert not got["complete"] and [r["length"] for r in got["rows"]] == [512]
    assert got["rows"][0]["ratio"] == 2.0
    assert not list(tmp_path.glob("*.tmp"))
