"""The CPU server's step budget: the narrowest width near the best rate per token, measured once per
CPU and model, stored, and used only where no budget was set."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_engine.config import DEFAULT_TOKEN_BUDGET, MEASURED_TOKEN_BUDGET, EngineConfig
from agent_engine.engine import step_budget
from agent_engine.engine.step_budget import measured_budget, narrowest_near_best, timed_widths
from kernels import calibration_store, load_cpu_ops

pytestmark = pytest.mark.core


@pytest.fixture(autouse=True)
def kernels_loaded() -> None:
    """The kernels' library from the usual cache, before a test points the cache at a temporary folder
    (the store's keys name the library: otherwise it would be built again there)."""
    load_cpu_ops()


@pytest.mark.parametrize(("seconds", "expected"), [
    ([0.256, 0.512, 1.024], 256),  # a flat rate: the narrowest
    ([0.300, 0.520, 1.040], 512),  # the rate grows to 512, then stays
    ([0.300, 0.380, 0.700], 1024),  # 1024 still 8% cheaper a token than 512
    ([0.300, 0.360, 0.700], 512),  # 512 within 3% of 1024
    ([0.300, 0.600, 0.560], 1024),  # a slow step at 512 moves nothing below it
])
def test_the_budget_is_the_narrowest_width_within_the_tolerance_of_the_best(
        seconds: list[float], expected: int) -> None:
    assert narrowest_near_best((256, 512, 1024), seconds) == expected


class FakeRunner:
    """A runner whose step costs a fixed overhead plus a rate that saturates at ``full_width``."""

    def __init__(self, num_kv_blocks: int = 1000, block_size: int = 16, full_width: int = 256,
                 step_s: float = 0.4) -> None:
        self.num_kv_blocks, self.block_size, self.full_width = num_kv_blocks, block_size, full_width
        self.step_s = step_s
        self.calls: list[tuple[tuple[int, ...], int, bool]] = []

    def profile_steps(self, lengths: Sequence[int], seq_tokens: int, warm_up: bool = True) -> list[float]:
        self.calls.append((tuple(lengths), seq_tokens, warm_up))
        return [self.step_s * max(w, self.full_width) / self.full_width for w in lengths]


def test_only_widths_that_fit_the_pool_and_the_context_are_timed(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    assert timed_widths(FakeRunner(num_kv_blocks=33), 4096) == (256, 512)  # 512 tokens of pool
    assert timed_widths(FakeRunner(), 300) == (256, 512, 1024)  # prompts of 256 fit a context of 300
    assert timed_widths(FakeRunner(), 200) == ()  # but not one of 200
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    tiny = FakeRunner(num_kv_blocks=3)
    assert timed_widths(tiny, 4096) == ()
    assert measured_budget(tiny, {"hidden_size": 64}, 4096).budget == step_budget.WIDTHS[0]  # nothing to time
    assert tiny.calls == [] and not list(tmp_path.rglob("*.json"))


def test_measured_once_per_key_stored_and_short_steps_timed_again(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration_store, "_unstored", {})
    runner = FakeRunner(full_width=512)
    shape = {"hidden_size": 64, "weights": "float"}
    first = measured_budget(runner, shape, 4096)
    assert first.budget == 512
    # rounds over every width, one step each of prompts of 256: the first warmed up, the second not
    assert runner.calls == [((256, 512, 1024), 256, True), ((256, 512, 1024), 256, False)]
    assert measured_budget(runner, shape, 4096) == first and len(runner.calls) == 2  # read back
    other = measured_budget(FakeRunner(full_width=1024), {**shape, "hidden_size": 128}, 4096)
    assert other.budget == 1024  # another model is another key


def test_a_cheap_model_gets_a_third_round(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration_store, "_unstored", {})
    runner = FakeRunner(full_width=2048, step_s=0.05)  # 0.15 s a round: under CHEAP_ROUND_S
    assert measured_budget(runner, {"hidden_size": 32}, 4096).budget == 1024  # a step costs the same at any width
    assert len(runner.calls) == 3


@pytest.mark.parametrize("tamper", [
    {"budget": 300},  # not a timed width
    {"budget": 1024},  # a timed width, but not what the rule gives these timings
    {"ms": {"256": [1.0], "512": [1.0], "1024": [1.0], "99999": [1.0]}, "budget": 99999},  # widths never timed
])
def test_a_tampered_stored_budget_is_measured_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    tamper: dict) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration_store, "_unstored", {})
    runner, shape = FakeRunner(full_width=512), {"hidden_size": 64}
    stored = measured_budget(runner, shape, 4096)
    path = calibration_store.store_path(stored.key)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, **tamper}))
    assert measured_budget(runner, shape, 4096).budget == stored.budget == 512
    assert len(runner.calls) == 4  # measured again: two more rounds


def test_a_server_on_cpu_measures_an_unset_budget_and_keeps_a_set_one() -> None:
    unset = EngineConfig()
    assert unset.token_budget == DEFAULT_TOKEN_BUDGET  # offline
    on_cpu = unset.for_serving("cpu")
    assert on_cpu.max_num_batched_tokens == MEASURED_TOKEN_BUDGET and on_cpu.measures_token_budget
    with pytest.raises(ValueError, match="measured"):
        _ = on_cpu.token_budget  # no number until the engine measured it
    assert on_cpu.with_token_budget(512).token_budget == 512
    assert EngineConfig(max_num_seqs=600).for_serving("cpu").with_token_budget(512).token_budget == 600
    assert on_cpu.with_token_budget(None).token_budget == DEFAULT_TOKEN_BUDGET  # nothing measured (CUDA)
    chosen = EngineConfig(max_num_batched_tokens=512)
    assert chosen.for_serving("cpu") is chosen and chosen.with_token_budget(1024) is chosen
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        EngineConfig(max_num_batched_tokens=-1)


def test_an_engine_measures_its_budget_on_the_loaded_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A real engine on the embedded model: the budget is one of the timed widths, at least max_num_seqs,
    and the scheduler takes it."""
    from agent_engine.engine.llm_engine import LLMEngine

    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    engine = LLMEngine(EngineConfig(device="cpu", num_kv_blocks=40, max_model_len=600,
                                    max_num_seqs=8).for_serving("cpu"))
    budget = engine.config.token_budget
    assert budget in step_budget.WIDTHS[:2]  # 39 blocks of 16: up to two prompts of 256
    assert engine.sched_config.max_num_batched_tokens == budget


def test_bench_budget_prints_and_writes_each_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``bench budget`` on the embedded model: one row per run, its tokens/s per timed width and a budget
    among them, the machine named (stored in a store of the test's own: a run under test load never
    replaces the machine's)."""
    from benchmarks.step_budget_bench import main

    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "budget.json"
    assert main(["--models", "embedded", "--repeats", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [r["model"] for r in data["runs"]] == ["embedded", "embedded"] and data["machine"]["cpu_model"]
    for r in data["runs"]:
        assert sorted(map(int, r["tokens_per_s"])) == list(step_budget.WIDTHS)
        assert all(v > 0 for v in r["tokens_per_s"].values()) and str(r["budget"]) in r["tokens_per_s"]


def test_the_flag_help_names_the_widths_and_tolerance_the_measurement_uses() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    EngineConfig.add_arguments(parser, ["max_num_batched_tokens"])
    words = parser.format_help().replace(",", " ").split()
    assert all(str(w) in words for w in step_budget.WIDTHS)
    assert f"{step_budget.TOLERANCE:.0%}" in words
