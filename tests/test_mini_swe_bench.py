"""mini-swe-agent rows of ``bench agent-tasks``: reading its trajectories, summarizing, which rows run."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.agent_tasks import _pairs, add_arguments
from benchmarks.mini_swe import _read_trajectory, summarize

pytestmark = pytest.mark.core


def test_trajectory_counts_answers_and_rejected_answers(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"info": {"exit_status": "Submitted"}, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "user", "content": "Tool call error", "extra": {"interrupt_type": "FormatError"}},
        {"role": "assistant", "content": "ls"}, {"role": "tool", "content": "calc.py"},
        {"role": "assistant", "content": "submit"}]}))
    assert _read_trajectory(path) == (3, 1, "Submitted")
    assert _read_trajectory(tmp_path / "missing.json") == (0, 0, "NoTrajectory")


def test_summary_matches_our_runner_fields() -> None:
    outcomes = [{"solved": True, "steps": 4, "format_errors": 0, "jct_s": 10.0, "exit_status": "Submitted", "error": None},
                {"solved": False, "steps": 8, "format_errors": 2, "jct_s": 30.0, "exit_status": "LimitsExceeded",
                 "error": None}]
    s = summarize(outcomes)
    assert (s["solved"], s["checked"], s["jobs"], s["format_errors"]) == (1, 2, 2, 2)
    assert s["steps_mean"] == 6 and s["jct_mean"] == 20 and s["jct_p90"] == 30
    assert s["exit_statuses"] == {"Submitted": 1, "LimitsExceeded": 1}


def test_mini_rows_are_hint_free_only() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--interfaces", "tools,mini", "--policies", "fcfs,continuum", "--hints", "job_id,none"])
    rows = _pairs(args)
    assert ("mini", "continuum", "none") in rows and ("mini", "continuum", "job_id") not in rows
    assert len(rows) == 4 + 2
    with pytest.raises(ValueError, match="known"):
        _pairs(p.parse_args(["--interfaces", "swe-agent"]))


def test_vllm_rows_are_added_hint_free_per_interface() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--interfaces", "tools,mini", "--policies", "fcfs,continuum", "--hints", "job_id",
                         "--vllm", "/usr/bin/python3"])
    rows = _pairs(args)
    assert rows == [("tools", "fcfs", "job_id"), ("tools", "continuum", "job_id"), ("tools", "vllm-cpu", "none")]
    assert ("tools", "vllm-cpu", "none") not in _pairs(p.parse_args(["--policies", "fcfs"]))


def test_the_peers_rows_may_run_alone_but_some_row_must() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    alone = _pairs(p.parse_args(["--interfaces", "text", "--policies", "", "--llama-server", "/bin/llama-server"]))
    assert alone == [("text", "llama-server", "none")]
    with pytest.raises(ValueError, match="no policy"):
        _pairs(p.parse_args(["--policies", ""]))
