"""The fault test, under every scheduling policy: agent load with random disconnects, client timeouts,
the bad-input catalogue (the poisoned request among it) and a SIGTERM in the middle; afterwards every
accepted request ended with a completion or an error it could read, every block is free and every pin
ended exactly once (``benchmarks.reliability`` decides; here at a small scale)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.hostile_tenant import run_phase
from benchmarks.jct_config import policy_engine_args
from benchmarks.reliability import DEFAULT_POLICIES, add_arguments, run_policy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.mark.parametrize("policy", DEFAULT_POLICIES)
def test_nothing_is_lost_under_faults_and_sigterm(policy, tmp_path):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--jobs", "4", "--turns", "3", "--sigterm-after", "6",
                              "--log-dir", str(tmp_path)])
    row = run_policy(policy, args)
    assert row["violations"] == 0, row
    assert set(row["bad_inputs"]) == {"4xx"}, row  # every bad input a 4xx with an error body
    assert row["exit_code"] == 0 and row["final"]["blocks_in_use"] == 0, row
    assert row["final"]["num_running"] == 0 and row["final"]["num_waiting"] == 0
    assert row["pins_created"] == row["pins_ended"] and row["clean"]


def test_a_hostile_tenant_loses_the_victim_nothing(tmp_path):
    """The hostile-tenant phase at a small scale: every probe answered without a 5xx, the server up, none
    of the victim's turns lost. (Its latency targets belong to the benchmark, not to a timed test.)"""
    phase = run_phase([*policy_engine_args("continuum"), "--num-kv-blocks", "512", "--max-model-len", "1024"],
                      str(tmp_path), jobs=2, turns=2, seed=0, attack_requests=150)
    assert phase["server_alive"] and phase["victim_lost"] == 0, phase
    assert phase["attacker_requests"] >= 150 and "5xx" not in phase["attacker_answers"], phase
    assert not any(k.startswith("no_answer") for k in phase["attacker_answers"]), phase
    assert phase["quiet"]["turns"] == phase["attacked"]["turns"] == 4
