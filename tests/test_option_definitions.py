"""Every engine option is defined once, in ``EngineConfig``: the simulator's and the benchmarks' engine
flags (``bench jct``, ``agent-tasks``, ``quant-parity``, ``serve``, ``throughput``, ``profile_step``)
are EngineConfig's own (name, type, help), with EngineConfig's defaults except where the command lists
a visible override (``GPU_DEFAULTS``, ``ENGINE_DEFAULTS``), and no other flag of theirs takes an engine
option's name unless it is listed here as the command's own."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from agent_engine.config import EngineConfig
from agent_engine.sim import cli as sim_cli
from benchmarks import agent_tasks, jct_config, profile_step, quant_parity, serve_load, throughput

FIELDS = {f.name: f for f in dataclasses.fields(EngineConfig)}
# Flags that share an engine option's name but mean the command's own thing.
SIM_OWN = {"model": "a ModelSpec name (llama-3.1-8b)", "seed": "the workload's seed"}
JCT_OWN = {"seed": "the replay's seed, also passed to every server"}


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}


def _reference() -> dict[str, argparse.Action]:
    ref = argparse.ArgumentParser()
    EngineConfig.add_arguments(ref)
    return _actions(ref)


def _check(parser: argparse.ArgumentParser, names: tuple[str, ...], overrides: dict[str, object],
           own: dict[str, str]) -> None:
    actions, ref = _actions(parser), _reference()
    engine_named = {dest for dest in actions if dest in FIELDS}
    assert engine_named == set(names) | set(own), "a hand-written engine flag, or one missing"
    assert set(overrides) <= set(names)
    for name in names:
        got, want = actions[name], ref[name]
        assert got.option_strings == want.option_strings, name
        assert got.option_strings[0] == "--" + name.replace("_", "-")
        assert (type(got), got.type) == (type(want), want.type), name
        assert got.help.split(" (default")[0] == want.help.split(" (default")[0], name
        expected = overrides.get(name, FIELDS[name].default)
        assert got.default == expected, name
        if name in overrides:
            assert got.default != FIELDS[name].default, f"{name}: an override equal to the engine's default"
            assert f"the engine's: {FIELDS[name].default}" in got.help


@pytest.mark.core
def test_the_server_flags_are_every_engine_option_with_its_default() -> None:
    ref = _reference()
    assert set(ref) == set(FIELDS)
    assert all(ref[name].default == f.default for name, f in FIELDS.items())


@pytest.mark.core
def test_the_simulator_engine_flags_are_engine_config_flags() -> None:
    ap = argparse.ArgumentParser()
    sim_cli.add_arguments(ap)
    _check(ap, sim_cli.ENGINE_FLAGS, sim_cli.GPU_DEFAULTS, SIM_OWN)
    assert sim_cli.GPU_DEFAULTS == {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
    engine = sim_cli.engine_options(ap.parse_args([]))
    assert engine == EngineConfig(**sim_cli.GPU_DEFAULTS)  # type: ignore[arg-type]


@pytest.mark.core
def test_the_jct_benchmark_engine_flags_are_engine_config_flags() -> None:
    ap = argparse.ArgumentParser()
    jct_config.add_jct_args(ap)
    _check(ap, jct_config.ENGINE_FLAGS, jct_config.ENGINE_DEFAULTS, JCT_OWN)
    cfg, default = jct_config.config_from_args(ap.parse_args([])), jct_config.JCTConfig()
    for name in jct_config.ENGINE_FLAGS:
        expected = jct_config.ENGINE_DEFAULTS.get(name, FIELDS[name].default)
        if expected is None:  # omitted: the measured regime chooses it (``JCTConfig.match``)
            assert name in cfg.match, name
            continue
        assert getattr(cfg, name) == getattr(default, name) == expected, name


@pytest.mark.core
def test_an_override_must_name_an_added_engine_option() -> None:
    with pytest.raises(ValueError, match="not engine options"):
        EngineConfig.add_arguments(argparse.ArgumentParser(), ["block_size", "no_such_option"])
    with pytest.raises(ValueError, match="not added"):
        EngineConfig.add_arguments(argparse.ArgumentParser(), ["block_size"], {"max_num_seqs": 8})


@pytest.mark.core
@pytest.mark.parametrize("module", [agent_tasks, quant_parity], ids=["agent-tasks", "quant-parity"])
def test_the_agent_and_parity_benchmarks_engine_flags_are_engine_config_flags(module: object) -> None:
    """``bench agent-tasks`` passes its engine flags to every server it starts, ``bench quant-parity`` to both
    engines: EngineConfig's flags with visible overrides; ``--model`` and ``--seed`` are the commands' own
    (a known-name default; the agent's seed too)."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    own = {"model": "the command's default model"}
    if module is agent_tasks:
        own["seed"] = "the servers' and the agent's seed"
    _check(parser, module.ENGINE_FLAGS, module.ENGINE_DEFAULTS, own)  # type: ignore[attr-defined]


@pytest.mark.core
@pytest.mark.parametrize("module", [serve_load, throughput, profile_step], ids=["serve", "throughput", "profile-step"])
def test_the_serving_and_offline_benchmarks_engine_flags_are_engine_config_flags(module: object) -> None:
    """``bench serve`` passes its engine flags to each server of ours, ``bench throughput`` and
    ``profile_step`` build their engine from them (``EngineConfig.from_args``): EngineConfig's flags with
    visible overrides. ``--model`` (a named model or a file, resolved per server) and the prompts'
    ``--seed`` are the commands' own, as is ``bench serve``'s ``--gguf-weights`` (a list: one server each)."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    names, overrides = module.ENGINE_FLAGS, module.ENGINE_DEFAULTS  # type: ignore[attr-defined]
    own = {"model": "a named model, a folder or a .gguf file"}
    if module is serve_load:
        own["gguf_weights"] = "a comma list of weight forms, one server each"
    else:
        own["seed"] = "the random prompts' seed"
    _check(parser, names, overrides, own)
    config = EngineConfig.from_args(parser.parse_args([]), names)
    assert config == EngineConfig(**overrides)  # type: ignore[arg-type]
