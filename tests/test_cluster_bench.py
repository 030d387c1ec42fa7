"""``bench jct --replicas N --routers ...``: row names per router, the serve flags, next-turn reuse."""

from __future__ import annotations

import argparse

import pytest

from agent_engine.workloads.replay.records import TurnRecord
from benchmarks.jct_cluster import cluster_args, parse_routers, split_router, turn_reuse, with_routers
from benchmarks.jct_config import add_jct_args, config_from_args, run_names, split_run_name

pytestmark = pytest.mark.core


def _cfg(*argv: str):  # type: ignore[no-untyped-def]
    p = argparse.ArgumentParser()
    add_jct_args(p)
    return config_from_args(p.parse_args(list(argv)))


def test_every_row_runs_once_per_router_with_replicas() -> None:
    cfg = _cfg("--policies", "fcfs,continuum", "--replicas", "2", "--routers", "affinity,rr", "--hints",
               "job_id,none")
    names = run_names(cfg)
    assert names == ["fcfs+router=affinity", "fcfs+router=rr", "fcfs+hints=none+router=affinity",
                     "fcfs+hints=none+router=rr", "continuum+router=affinity", "continuum+router=rr",
                     "continuum+hints=none+router=affinity", "continuum+hints=none+router=rr"]
    base, router = split_router(names[2])
    assert (split_run_name(base), router) == (("fcfs", "none"), "affinity")
    assert cluster_args(cfg.replicas, router) == ["--replicas", "2", "--router", "affinity"]
    single = _cfg("--policies", "continuum")
    assert run_names(single) == ["continuum"] and cluster_args(1, None) == []
    assert with_routers(["continuum", "vllm-cpu"], 2, ["affinity", "pow2"]) == [
        "continuum+router=affinity", "continuum+router=pow2", "vllm-cpu"]
    with pytest.raises(ValueError, match="routers"):
        parse_routers("affinity,random")


def test_turn_reuse_reads_the_replay_records_in_turn_order() -> None:
    turns = [TurnRecord("a", 1, 0.0, prompt_tokens=150, output_tokens=10, cached_tokens=110),
             TurnRecord("a", 0, 0.0, prompt_tokens=100, output_tokens=10, cached_tokens=0),
             TurnRecord("b", 0, 0.0, prompt_tokens=50, output_tokens=5, cached_tokens=0),
             TurnRecord("b", 1, 0.0, prompt_tokens=80, output_tokens=5, error="boom")]
    assert turn_reuse(turns) == 1.0  # a's second turn found all 110 tokens; b's failed turn is left out
    assert turn_reuse(turns[2:]) is None
