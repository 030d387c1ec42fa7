"""Trace format, the trace resolver, profile fitting, synthesis and the trace CLI.

No server and no torch; every trace is the shipped default trace, a synthesized one or hand-made jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent_engine.cli.main import main as cli_main
from agent_engine.workloads.traces import (
    DEFAULT_TRACE,
    TraceFormatError,
    TraceJob,
    TraceTurn,
    fit_profile,
    load_profile,
    load_trace,
    read_jobs,
    save_profile,
    synthesize,
    trace_label,
    validate_job,
    write_jobs,
)
from agent_engine.workloads.traces.profile import Profile
from agent_engine.workloads.traces.source import DEFAULT_TRACE_JOBS, DEFAULT_TRACE_SEED

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_jobs() -> list[TraceJob]:
    return load_trace()


def _job(prompts: list[int], outputs: list[int], secs: list[float | None], job_id: str = "j") -> TraceJob:
    turns = [
        TraceTurn(p, o, tool_name="bash:ls", tool_seconds=s)
        for p, o, s in zip(prompts, outputs, secs, strict=True)
    ]
    return TraceJob(job_id, turns, meta={"source": "test"})


# --- format -------------------------------------------------------------------------------------


@pytest.mark.core
def test_round_trip_hand_made(tmp_path: Path) -> None:
    job = _job([10, 25, 40], [5, 3, 2], [0.5, 1.25, None])
    job.turns[0].extra = {"tool_names": ["bash:ls"], "n_tool_calls": 1}
    path = tmp_path / "t.jsonl"
    assert write_jobs(path, [job, job]) == 2
    back = read_jobs(path)
    assert [j.to_dict() for j in back] == [job.to_dict()] * 2
    assert back[0] == job


@pytest.mark.core
def test_round_trip_default_trace_lines() -> None:
    with DEFAULT_TRACE.open() as f:
        lines = [f.readline() for _ in range(5)]
    for line in lines:
        d = json.loads(line)
        assert TraceJob.from_dict(d).to_dict() == d
        assert json.dumps(TraceJob.from_dict(d).to_dict()) == line.rstrip("\n")


@pytest.mark.core
def test_validate_catches_violations(tmp_path: Path) -> None:
    assert validate_job(_job([10, 25], [5, 3], [0.5, None])) == []
    assert any("previous prompt+output" in e for e in validate_job(_job([10, 14], [5, 3], [0.5, None])))
    assert any("null after the last" in e for e in validate_job(_job([10, 25], [5, 3], [0.5, 0.1])))
    assert any("finite number" in e for e in validate_job(_job([10, 25], [5, 3], [None, None])))
    assert validate_job(TraceJob("x", []))
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_job([10, 12], [5, 3], [0.5, None]).to_dict()) + "\n")
    with pytest.raises(TraceFormatError, match="bad.jsonl:1"):
        read_jobs(path)
    assert len(read_jobs(path, validate=False)) == 1


# --- fit ----------------------------------------------------------------------------------------


@pytest.mark.core
def test_swe_profile_stats_match_readme() -> None:
    """The built-in swe profile holds the statistics of the 142 real runs it was fitted on."""
    p = load_profile("swe")
    st = p.stats
    assert st["jobs"] == 142 and st["turns"] > 11000
    assert 70 <= st["turns_per_job"]["p50"] <= 80  # README: p50 75
    assert 110 <= st["turns_per_job"]["p90"] <= 120  # README: p90 115
    assert 0.25 <= st["tool_seconds"]["p50"] <= 0.29  # README: tool p50 0.27 s
    assert 4.0 <= st["tool_seconds"]["p99"] <= 5.2  # README: p99 4.6 s
    assert 17_000 <= st["prompt_tokens"]["p50"] <= 21_000  # README: ~19k
    assert 80 <= st["output_tokens"]["p50"] <= 100  # README: 89
    assert "bash:pytest" in p.tool_seconds and "bash:wc" not in p.tool_seconds  # min_samples fallback
    assert abs(sum(p.tool_start.values()) - 1) < 1e-4
    assert all(abs(sum(row.values()) - 1) < 1e-4 for row in p.tool_transitions.values())
    assert Profile.from_json(json.loads(json.dumps(p.to_json()))) == p


@pytest.mark.core
def test_fit_deterministic_and_saved_profile_round_trips(default_jobs: list[TraceJob], tmp_path: Path
                                                         ) -> None:
    p = fit_profile(default_jobs, name="swe", description="refit of the default trace")
    assert fit_profile(default_jobs, name="swe", description="refit of the default trace") == p
    st = p.stats
    assert st["jobs"] == DEFAULT_TRACE_JOBS and st["turns"] == sum(len(j.turns) for j in default_jobs)
    assert abs(sum(p.tool_start.values()) - 1) < 1e-4
    assert all(abs(sum(row.values()) - 1) < 1e-4 for row in p.tool_transitions.values())
    save_profile(p, tmp_path / "p.json")
    assert load_profile(tmp_path / "p.json").to_json() == p.to_json()


# --- the trace resolver -------------------------------------------------------------------------


@pytest.mark.core
def test_load_trace_default_synth_and_errors(default_jobs: list[TraceJob]) -> None:
    assert len(default_jobs) == DEFAULT_TRACE_JOBS == 128
    assert all(validate_job(j) == [] for j in default_jobs)
    assert [j.job_id for j in load_trace("default", max_jobs=3)] == [j.job_id for j in default_jobs[:3]]
    assert [j.to_dict() for j in load_trace(str(DEFAULT_TRACE), max_jobs=2)] == [
        j.to_dict() for j in default_jobs[:2]]
    bfcl = load_trace("synth:bfcl", max_jobs=4, seed=2)
    assert [j.to_dict() for j in bfcl] == [j.to_dict() for j in synthesize(load_profile("bfcl"), 4, seed=2)]
    assert trace_label(None).startswith("default") and trace_label("synth:swe") == "synth:swe"
    with pytest.raises(ValueError, match="missing.jsonl"):
        load_trace("missing.jsonl")
    with pytest.raises(ValueError, match="no-such-profile"):
        load_trace("synth:no-such-profile")


@pytest.mark.core
def test_default_trace_is_its_recipe(default_jobs: list[TraceJob]) -> None:
    """The shipped trace is exactly ``trace synth --profile swe --jobs 128 --seed 7``."""
    recipe = synthesize(load_profile("swe"), DEFAULT_TRACE_JOBS, seed=DEFAULT_TRACE_SEED)
    assert [j.to_dict() for j in recipe] == [j.to_dict() for j in default_jobs]


# --- synth --------------------------------------------------------------------------------------


@pytest.mark.core
def test_synth_deterministic_and_valid() -> None:
    p = load_profile("swe")
    a = [j.to_dict() for j in synthesize(p, 12, seed=7)]
    b = [j.to_dict() for j in synthesize(p, 12, seed=7)]
    assert a == b
    assert a != [j.to_dict() for j in synthesize(p, 12, seed=8)]
    assert [j.to_dict() for j in synthesize(p, 5, seed=7)] == a[:5]  # job i depends on (seed, i) only
    for job in synthesize(p, 50, seed=1) + synthesize(load_profile("bfcl"), 200, seed=1):
        assert validate_job(job) == []
        for prev, cur in zip(job.turns, job.turns[1:], strict=False):
            assert cur.prompt_tokens >= prev.prompt_tokens + prev.output_tokens
        assert job.turns[-1].tool_seconds is None
        assert all(t.tool_seconds is not None and t.tool_seconds >= 0 for t in job.turns[:-1])


def _medians(jobs: list[TraceJob]) -> tuple[float, float, float]:
    turns = [len(j.turns) for j in jobs]
    secs = [t.tool_seconds for j in jobs for t in j.turns if t.tool_seconds is not None]
    prompts = [t.prompt_tokens for j in jobs for t in j.turns]
    return float(np.median(turns)), float(np.median(secs)), float(np.median(prompts))


@pytest.mark.core
def test_synth_swe_reproduces_shape() -> None:
    turns, secs, prompts = _medians(synthesize(load_profile("swe"), 400, seed=0))
    assert 74.5 * 0.9 <= turns <= 74.5 * 1.1
    assert 0.268 * 0.9 <= secs <= 0.268 * 1.1
    assert 19_114 * 0.85 <= prompts <= 19_114 * 1.15


@pytest.mark.core
def test_synth_from_fitted_profile_matches_source(default_jobs: list[TraceJob]) -> None:
    p = fit_profile(default_jobs, name="x", tool_dist="lognormal")
    real = _medians(default_jobs)
    synth = _medians(synthesize(p, 400, seed=3))
    assert abs(synth[0] - real[0]) <= 0.1 * real[0]
    assert abs(synth[1] - real[1]) <= 0.1 * real[1]
    assert abs(synth[2] - real[2]) <= 0.15 * real[2]


@pytest.mark.core
def test_bfcl_profile_shape() -> None:
    jobs = synthesize(load_profile("bfcl"), 3000, seed=0)
    turns = [len(j.turns) for j in jobs]
    secs = [t.tool_seconds for j in jobs for t in j.turns if t.tool_seconds is not None]
    assert abs(np.mean(turns) - 6.3) < 0.25 and abs(np.std(turns) - 2.3) < 0.25
    assert abs(np.mean(secs) - 1.9) < 0.15 and abs(np.std(secs) - 2.1) < 0.4


# --- CLI ----------------------------------------------------------------------------------------


@pytest.mark.core
def test_cli_synth_then_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, prof = tmp_path / "s.jsonl", tmp_path / "p.json"
    assert (
        cli_main(["trace", "synth", "--profile", "bfcl", "--jobs", "300", "--seed", "5", "-o", str(trace)])
        == 0
    )
    assert cli_main(["trace", "fit", str(trace), "-o", str(prof), "--name", "refit"]) == 0
    assert "fitted 300 jobs" in capsys.readouterr().out
    refit = load_profile(prof)
    assert refit.name == "refit" and abs(refit.stats["turns_per_job"]["mean"] - 6.3) < 0.5
    assert len(synthesize(refit, 3, seed=0)) == 3


@pytest.mark.slow
def test_no_heavy_imports() -> None:
    code = (
        "import sys, agent_engine.workloads.traces, agent_engine.workloads.cli,"
        " agent_engine.workloads.replay;"
        "print([m for m in ('torch', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
