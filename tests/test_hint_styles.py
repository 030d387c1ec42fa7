"""Client hint styles: each sends only its own convention, and the server reads each back as its source."""

from __future__ import annotations

import pytest

from agent_engine.server.hints import HINT_SOURCES, resolve_job
from agent_engine.workloads.hint_styles import HINT_STYLES, hint_fields, releases_jobs
from agent_engine.workloads.replay.plan import ReplayOptions
from benchmarks.jct_config import JCTConfig, run_names, split_run_name
from benchmarks.jct_report import compute_checks

pytestmark = pytest.mark.core


@pytest.mark.parametrize("style", [s for s in HINT_STYLES if s != "none"])
def test_every_style_round_trips_through_the_server_resolver(style):
    body, headers = hint_fields(style, "replay0-3", is_last_step=False, tool_name="bash:ls")
    job, source = resolve_job(body, {k.lower(): v for k, v in headers.items()})
    assert source == style and source in HINT_SOURCES
    assert job == "replay0-3"


def test_none_sends_nothing_and_only_our_style_sends_scheduling_hints():
    assert hint_fields("none", "j", True, "bash:ls") == ({}, {})
    assert resolve_job(*hint_fields("none", "j", True, "bash:ls")) == (None, "none")
    assert hint_fields("job_id", "j", True, "bash:ls")[0] == {"job_id": "j", "is_last_step": True,
                                                               "tool_name": "bash:ls"}
    assert hint_fields("prompt_cache_key", "j", True, "bash:ls") == ({"prompt_cache_key": "j"}, {})
    assert releases_jobs("job_id") and not releases_jobs("none") and not releases_jobs("claude-code")
    with pytest.raises(ValueError, match="unknown hint style"):
        hint_fields("carrier-pigeon", "j", False, None)
    with pytest.raises(ValueError, match="unknown hints style"):
        ReplayOptions(hints="carrier-pigeon")


def test_bench_rows_per_policy_and_style_and_the_hint_free_checks():
    cfg = JCTConfig(policies=("fcfs", "continuum"), hints=("none", "job_id"))
    names = run_names(cfg)
    assert names == ["fcfs+hints=none", "fcfs", "continuum+hints=none", "continuum"]
    assert [split_run_name(n) for n in names[2:]] == [("continuum", "none"), ("continuum", "job_id")]
    rows = {"continuum": {"mean_jct_s": 10.0, "prefix_hit_ratio": 0.8},
            "continuum+hints=none": {"mean_jct_s": 10.5, "prefix_hit_ratio": 0.76}}
    checks = compute_checks(rows)
    assert checks["hint_free_jct"]["pass"] and checks["hint_free_jct"]["value"] == pytest.approx(1.05)
    assert checks["hint_free_reuse"]["pass"]
    rows["continuum+hints=none"]["mean_jct_s"] = 12.0
    assert compute_checks(rows)["hint_free_jct"]["pass"] is False
    assert compute_checks({"continuum": rows["continuum"]})["hint_free_jct"]["pass"] is None
