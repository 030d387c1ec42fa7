"""Trace format, profile fitting, synthesis, replay summaries and the trace CLI (no server, no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent_engine.workloads.replay.records import JobRecord, TurnRecord, read_records, summarize, write_records
from agent_engine.workloads.traces import (
    TraceFormatError,
    TraceJob,
    TraceTurn,
    fit_profile,
    load_profile,
    read_jobs,
    synthesize,
    validate_job,
    write_jobs,
)
from agent_engine.workloads.cli import main as trace_main
from agent_engine.workloads.traces.profile import Profile

REPO = Path(__file__).resolve().parents[1]
TRACES_DIR = Path(os.environ.get("AGENT_ENGINE_TRACES", REPO.parent / "shared" / "traces"))
SHARED_TRACE = TRACES_DIR / "mini_swe_agent_deepseek.jsonl"
needs_trace = pytest.mark.skipif(not SHARED_TRACE.is_file(), reason=f"no shared trace at {SHARED_TRACE}")


@pytest.fixture(scope="module")
def shared_jobs() -> list[TraceJob]:
    return read_jobs(SHARED_TRACE)


def _job(prompts: list[int], outputs: list[int], secs: list[float | None], job_id: str = "j") -> TraceJob:
    turns = [
        TraceTurn(p, o, tool_name="bash:ls", tool_seconds=s)
        for p, o, s in zip(prompts, outputs, secs, strict=True)
    ]
    return TraceJob(job_id, turns, meta={"source": "test"})


# --- format -------------------------------------------------------------------------------------


def test_round_trip_hand_made(tmp_path: Path) -> None:
    job = _job([10, 25, 40], [5, 3, 2], [0.5, 1.25, None])
    job.turns[0].extra = {"tool_names": ["bash:ls"], "n_tool_calls": 1}
    path = tmp_path / "t.jsonl"
    assert write_jobs(path, [job, job]) == 2
    back = read_jobs(path)
    assert [j.to_dict() for j in back] == [job.to_dict()] * 2
    assert back[0] == job


@needs_trace
def test_round_trip_shared_lines() -> None:
    with SHARED_TRACE.open() as f:
        lines = [f.readline() for _ in range(5)]
    for line in lines:
        d = json.loads(line)
        assert TraceJob.from_dict(d).to_dict() == d
        assert json.dumps(TraceJob.from_dict(d).to_dict()) == line.rstrip("\n")


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


@needs_trace
def test_fit_shared_trace_matches_readme(shared_jobs: list[TraceJob]) -> None:
    p = fit_profile(shared_jobs, name="swe")
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


@needs_trace
def test_builtin_swe_profile_is_the_fit_of_the_shared_trace(shared_jobs: list[TraceJob]) -> None:
    builtin = load_profile("swe")
    fitted = fit_profile(shared_jobs, name="swe", description=builtin.description)
    assert fitted.to_json() == builtin.to_json()


# --- synth --------------------------------------------------------------------------------------


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


def test_synth_swe_reproduces_shape() -> None:
    turns, secs, prompts = _medians(synthesize(load_profile("swe"), 400, seed=0))
    assert 74.5 * 0.9 <= turns <= 74.5 * 1.1
    assert 0.268 * 0.9 <= secs <= 0.268 * 1.1
    assert 19_114 * 0.85 <= prompts <= 19_114 * 1.15


@needs_trace
def test_synth_from_fitted_profile_matches_source(shared_jobs: list[TraceJob]) -> None:
    p = fit_profile(shared_jobs, name="x", tool_dist="lognormal")
    real = _medians(shared_jobs)
    synth = _medians(synthesize(p, 400, seed=3))
    assert abs(synth[0] - real[0]) <= 0.1 * real[0]
    assert abs(synth[1] - real[1]) <= 0.1 * real[1]
    assert abs(synth[2] - real[2]) <= 0.15 * real[2]


def test_bfcl_profile_shape() -> None:
    jobs = synthesize(load_profile("bfcl"), 3000, seed=0)
    turns = [len(j.turns) for j in jobs]
    secs = [t.tool_seconds for j in jobs for t in j.turns if t.tool_seconds is not None]
    assert abs(np.mean(turns) - 6.3) < 0.25 and abs(np.std(turns) - 2.3) < 0.25
    assert abs(np.mean(secs) - 1.9) < 0.15 and abs(np.std(secs) - 2.1) < 0.4


# --- CLI ----------------------------------------------------------------------------------------


def test_cli_synth_then_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, prof = tmp_path / "s.jsonl", tmp_path / "p.json"
    assert (
        trace_main(["trace", "synth", "--profile", "bfcl", "--jobs", "300", "--seed", "5", "-o", str(trace)])
        == 0
    )
    assert trace_main(["trace", "fit", str(trace), "-o", str(prof), "--name", "refit"]) == 0
    assert "fitted 300 jobs" in capsys.readouterr().out
    refit = load_profile(prof)
    assert refit.name == "refit" and abs(refit.stats["turns_per_job"]["mean"] - 6.3) < 0.5
    assert len(synthesize(refit, 3, seed=0)) == 3


def test_no_heavy_imports() -> None:
    code = (
        "import sys, agent_engine.workloads.traces, agent_engine.workloads.cli, agent_engine.workloads.replay;"
        "print([m for m in ('torch', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


# --- replay summaries ---------------------------------------------------------------------------


def test_summarize_hand_made_records(tmp_path: Path) -> None:
    recs = [
        TurnRecord(
            "a",
            0,
            0.0,
            1.0,
            1.0,
            ttft=0.5,
            queue_delay=0.5,
            queue_source="ttft",
            prompt_tokens=100,
            output_tokens=10,
            cached_tokens=0,
        ),
        TurnRecord(
            "a",
            1,
            2.0,
            3.0,
            1.0,
            ttft=0.2,
            queue_delay=0.1,
            queue_source="server",
            prompt_tokens=200,
            output_tokens=10,
            cached_tokens=110,
            is_last_step=True,
        ),
        JobRecord("a", "ta", 0.0, start_at=0.0, end_at=3.0, jct=3.0, turns=2, trace_turns=2),
        TurnRecord(
            "b",
            0,
            1.0,
            2.0,
            1.0,
            ttft=0.3,
            queue_delay=0.3,
            queue_source="ttft",
            prompt_tokens=100,
            output_tokens=5,
            cached_tokens=None,
            is_last_step=True,
        ),
        JobRecord("b", "tb", 1.0, start_at=1.0, end_at=2.0, jct=1.0, turns=1, trace_turns=3, truncated=True),
        TurnRecord("c", 0, 1.0, error="HTTP 500"),
        JobRecord("c", "tc", 1.0, start_at=1.0, error="HTTP 500"),
    ]
    s = summarize(recs)
    assert (s["jobs"], s["jobs_completed"], s["jobs_failed"], s["jobs_truncated"]) == (3, 2, 1, 1)
    assert (s["turns"], s["turns_failed"]) == (4, 1)
    assert s["jct_mean"] == pytest.approx(2.0) and s["jct_p50"] == pytest.approx(2.0)
    assert s["jct_p90"] == pytest.approx(2.8) and s["jct_p99"] == pytest.approx(2.98)
    assert s["duration_s"] == pytest.approx(3.0) and s["jobs_per_minute"] == pytest.approx(40.0)
    assert s["queue_delay_mean"] == pytest.approx(0.3) and s["ttft_mean"] == pytest.approx(1 / 3)
    assert s["prefix_hit_ratio"] == pytest.approx(110 / 300)  # job b reported no cached tokens
    assert (s["prompt_tokens"], s["output_tokens"]) == (400, 25)
    path = tmp_path / "r.jsonl"
    assert write_records(path, recs) == len(recs)
    assert read_records(path) == recs
    assert summarize([])["jct_mean"] is None
