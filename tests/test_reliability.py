"""The fault test, under every scheduling policy: agent load with random disconnects, client timeouts,
the bad-input catalogue (the poisoned request among it) and a SIGTERM in the middle; afterwards every
accepted request ended with a completion or an error it could read, every block is free and every pin
ended exactly once (``benchmarks.reliability`` decides; here at a small scale)."""

from __future__ import annotations

import argparse

import pytest

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
