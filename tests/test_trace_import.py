"""``agent-engine trace import``: each input shape, each repair, each bad-input case, the CLI.

The logs are the tiny hand-made files in tests/data/import/; every output must pass ``validate_job``
and load through ``load_trace``. No server, no torch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_engine.cli.main import main as cli_main
from agent_engine.workloads.traces import TraceJob, load_trace, validate_job, write_jobs
from agent_engine.workloads.traces.importers import ImportResult, classify, import_logs

pytestmark = pytest.mark.core

DATA = Path(__file__).resolve().parent / "data" / "import"


def _import(*names: str) -> ImportResult:
    result = import_logs([DATA / n for n in names])
    for job in result.jobs:
        assert validate_job(job) == [], job.job_id
    return result


def _by_id(jobs: list[TraceJob]) -> dict[str, TraceJob]:
    return {j.job_id: j for j in jobs}


def _dropped(result: ImportResult) -> dict[str, str]:
    return {str(i.place).rsplit("/", 1)[-1]: i.reason for i in result.report.dropped}


# ---- shapes --------------------------------------------------------------------------------------

def test_openai_log_groups_by_session_and_measures_times() -> None:
    r = _import("openai_log.jsonl")
    jobs = _by_id(r.jobs)
    assert list(jobs) == ["job-a", "job-b"]
    a = jobs["job-a"]
    assert [t.prompt_tokens for t in a.turns] == [120, 150, 170]
    assert [t.cached_tokens for t in a.turns] == [0, 128, 160]
    assert [t.tool_name for t in a.turns] == ["bash:pytest", "bash:grep", None]  # `cd repo && pytest`
    assert [t.tool_seconds for t in a.turns] == [4.0, 0.5, None]  # next start - this end
    assert [t.llm_seconds for t in a.turns] == [2.0, 1.0, 0.5]
    assert jobs["job-b"].turns[0].tool_name == "read_file"
    assert a.meta == {"source": "import:openai", "model": "gpt-test", "grouped_by": "id"}
    rep = r.report
    assert (rep.lines_read, rep.jobs_kept, rep.turns_kept, rep.dropped, rep.tokens_estimated) == (5, 2, 5, [], 0)
    assert rep.shapes == {str(DATA / "openai_log.jsonl"): "openai"}


def test_flat_openai_log_chains_by_prefix_estimates_tokens_and_imputes() -> None:
    r = _import("openai_flat.jsonl")
    jobs = _by_id(r.jobs)
    # both jobs start with the same messages; their answers tell them apart
    assert list(jobs) == ["openai_flat.jsonl:1", "openai_flat.jsonl:2"]
    assert [t.tool_name for t in jobs["openai_flat.jsonl:1"].turns] == ["bash:ls", None]
    b = jobs["openai_flat.jsonl:2"].turns
    assert [t.tool_name for t in b] == ["bash:find", "bash:cat", None]
    assert all(t.extra["tokens_estimated"] for t in b)
    assert r.report.tokens_estimated == 5
    # the call logged at line 3 has no end time: its tool time is unknown, imputed from the known ones
    assert b[1].llm_seconds is None and b[1].extra["tool_seconds_imputed"] is True
    assert b[1].tool_seconds == pytest.approx(2.25)  # no bash:cat time known: median of 2.0 and 2.5
    assert r.report.tool_times_imputed == 1


def test_anthropic_log_counts_cache_reads_in_the_prompt() -> None:
    r = _import("anthropic_log.jsonl")
    assert r.report.shapes[str(DATA / "anthropic_log.jsonl")] == "anthropic"
    (job,) = r.jobs
    assert [t.prompt_tokens for t in job.turns] == [200, 240, 280]  # input + cache read + cache creation
    assert [t.cached_tokens for t in job.turns] == [0, 200, 250]
    assert [t.tool_name for t in job.turns] == ["bash:make", "str_replace_editor", None]
    assert [t.tool_seconds for t in job.turns] == [2.5, 4.0, None]  # ISO 8601 times
    assert job.meta["source"] == "import:anthropic"


def test_our_trace_format_passes_through_unchanged() -> None:
    r = _import("unknown_tool_times.jsonl")
    src = [json.loads(line) for line in (DATA / "unknown_tool_times.jsonl").read_text().splitlines()]
    assert [j.job_id for j in r.jobs] == [d["job_id"] for d in src]
    assert r.jobs[0].turns[0].to_dict() == src[0]["turns"][0]
    assert r.jobs[0].meta == {"source": "test"}


@pytest.mark.parametrize(("line", "shape"), [
    ({"job_id": "x", "turns": []}, "trace"),
    ({"messages": [], "choices": []}, "openai"),
    ({"messages": [], "response": "hi"}, "openai"),
    ({"request": {"messages": []}, "response": {"type": "message", "content": []}}, "anthropic"),
    ({"messages": [], "usage": {"input_tokens": 3}}, "anthropic"),
    ({"messages": [], "response": {"role": "assistant", "content": [{"type": "text", "text": "x"}]}}, "openai"),
    ({"event": "start"}, None),
])
def test_classify(line: dict, shape: str | None) -> None:
    assert classify(line) == shape


# ---- repairs -------------------------------------------------------------------------------------

def test_compacted_context_becomes_a_segment() -> None:
    r = _import("compacted.jsonl")
    first, seg = r.jobs
    assert (first.job_id, seg.job_id) == ("job-c", "job-c#seg1")
    assert first.meta["segments"] == 2
    assert (seg.meta["segment_of"], seg.meta["segment"]) == ("job-c", 1)
    assert [t.prompt_tokens for t in first.turns] == [100, 130, 400]
    assert [t.prompt_tokens for t in seg.turns] == [90, 120]
    assert first.turns[-1].tool_seconds is None
    assert first.turns[-1].extra["tool_seconds_to_next_segment"] == 4.0
    assert r.report.segments_split == 1
    assert [str(n.place).rsplit("/", 1)[-1] for n in r.report.notes] == ["compacted.jsonl:4"]


def test_unknown_tool_times_get_the_tools_median_then_the_global_one() -> None:
    r = _import("unknown_tool_times.jsonl")
    u1, u2 = r.jobs
    assert u1.turns[2].tool_seconds == 4.0  # bash:pytest known: 2, 4, 6
    assert u1.turns[2].extra["tool_seconds_imputed"] is True
    assert u2.turns[1].tool_seconds == 3.0  # bash:git unknown: median of all known 0.5, 2, 4, 6
    assert "tool_seconds_imputed" not in u1.turns[0].extra
    assert r.report.tool_times_imputed == 2


def test_trace_repairs_clamp_split_name_and_drop(tmp_path: Path) -> None:
    r = _import("trace_repairs.jsonl")
    jobs = _by_id(r.jobs)
    assert list(jobs) == ["r1", "r1#seg1", "trace_repairs.jsonl:2"]
    assert jobs["r1"].turns[0].tool_seconds == 0.0  # was -0.4
    assert jobs["r1#seg1"].turns[-1].tool_seconds is None  # 3.0 after the last turn cleared
    rep = r.report
    assert (rep.tool_times_clamped, rep.segments_split) == (1, 1)
    assert _dropped(r) == {
        "trace_repairs.jsonl:3": "turn 0: prompt_tokens must be an int >= 1, got 'abc'",
        "trace_repairs.jsonl:4": "a job needs a non-empty 'turns' list",
        "trace_repairs.jsonl:5": f"duplicate job_id 'r1' (first at {DATA / 'trace_repairs.jsonl'}:1)",
    }
    notes = " | ".join(n.reason for n in rep.notes)
    assert "clamped at 0" in notes and "after the last turn cleared" in notes and "no usable job_id" in notes


def test_out_of_order_calls_are_sorted_or_dropped() -> None:
    r = _import("out_of_order.jsonl")
    (job,) = r.jobs
    assert job.job_id == "job-o"
    assert [t.prompt_tokens for t in job.turns] == [60, 80, 95]
    assert [t.tool_seconds for t in job.turns] == [4.0, 2.0, None]
    assert r.report.jobs_reordered == 1
    dropped = _dropped(r)
    assert set(dropped) == {"out_of_order.jsonl:4", "out_of_order.jsonl:5"}
    assert "cannot be ordered" in dropped["out_of_order.jsonl:4"]


def test_overlapping_calls_clamp_and_milliseconds(tmp_path: Path) -> None:
    def call(start_ms: int, end_ms: int, prompt: int) -> str:
        return json.dumps({"conversation_id": 7, "start_time": start_ms, "end_time": end_ms,
                           "messages": [{"role": "user", "content": "x"}], "response": "ok",
                           "usage": {"prompt_tokens": prompt, "completion_tokens": 2}})
    log = tmp_path / "skew.jsonl"
    log.write_text("\n".join([call(1_700_000_000_000, 1_700_000_002_000, 10),
                              call(1_700_000_001_500, 1_700_000_003_000, 20),  # starts before the end
                              call(1_700_000_004_000, 1_700_000_004_250, 30)]) + "\n")
    r = import_logs([log])
    (job,) = r.jobs
    assert job.job_id == "7"
    assert [t.tool_seconds for t in job.turns] == [0.0, 1.0, None]  # -0.5 s clamped; ms read as ms
    assert job.turns[2].llm_seconds == pytest.approx(0.25)
    assert r.report.tool_times_clamped == 1
    assert [str(n.place) for n in r.report.notes] == [f"{log}:1"]


def test_reimporting_an_imported_trace_changes_nothing(tmp_path: Path) -> None:
    first = _import("openai_flat.jsonl", "compacted.jsonl", "unknown_tool_times.jsonl", "trace_repairs.jsonl")
    out = tmp_path / "t.jsonl"
    write_jobs(out, first.jobs)
    again = import_logs([out])
    assert [j.to_dict() for j in again.jobs] == [j.to_dict() for j in first.jobs]
    assert (again.report.dropped, again.report.notes, again.report.segments_split) == ([], [], 0)


# ---- bad input -----------------------------------------------------------------------------------

def test_bad_lines_are_reported_with_their_place() -> None:
    r = _import("bad_lines.jsonl")
    dropped = _dropped(r)
    expect = {
        2: "bad JSON", 3: "must be a JSON object", 4: "unknown shape", 5: "no timestamp",
        6: "negative", 7: "before the start", 8: "no choices", 10: "truncated last line",
    }
    assert set(dropped) == {f"bad_lines.jsonl:{n}" for n in expect}
    for n, words in expect.items():
        assert words in dropped[f"bad_lines.jsonl:{n}"]
    (job,) = r.jobs
    assert len(job.turns) == 2 and r.report.lines_read == 10


def test_non_utf8_and_non_object_lines(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    good = (DATA / "openai_log.jsonl").read_bytes().splitlines(keepends=True)[0]
    log.write_bytes(good + b"\xff\xfe{}\n" + b"\n" + b'"just a string"\n')
    r = import_logs([log])
    assert len(r.jobs) == 1 and r.report.lines_read == 3  # the blank line is not counted
    assert {i.place.line: i.reason for i in r.report.dropped} == {
        2: "not UTF-8 text", 4: "a line must be a JSON object, got str"}


def test_unknown_shape_and_missing_file_are_errors_naming_the_file() -> None:
    with pytest.raises(ValueError, match="unknown_shape.jsonl: unknown log shape"):
        import_logs([DATA / "unknown_shape.jsonl"])
    with pytest.raises(ValueError, match="nope.jsonl"):
        import_logs([DATA / "nope.jsonl"])


# ---- the command ---------------------------------------------------------------------------------

def test_cli_writes_a_trace_every_reader_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, rep = tmp_path / "t.jsonl", tmp_path / "r.json"
    logs = [str(DATA / n) for n in ("openai_log.jsonl", "anthropic_log.jsonl", "compacted.jsonl", "bad_lines.jsonl")]
    assert cli_main(["trace", "import", *logs, "-o", str(out), "--report-json", str(rep)]) == 0
    printed = capsys.readouterr().out
    assert "segments split" in printed and "bad_lines.jsonl:10" in printed
    jobs = load_trace(str(out))
    assert [j.job_id for j in jobs][:3] == ["job-a", "job-b", "anthropic_log.jsonl:1"]
    assert "job-c#seg1" in {j.job_id for j in jobs}
    report = json.loads(rep.read_text())
    assert report["jobs_kept"] == len(jobs) and report["lines_dropped"] == 8
    assert report["dropped"][0]["place"].endswith("bad_lines.jsonl:2")


def test_cli_strict_fails_on_a_dropped_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert cli_main(["trace", "import", str(DATA / "bad_lines.jsonl"), "-o", str(out), "--strict"]) == 1
    assert "8 lines dropped (--strict)" in capsys.readouterr().err
    assert not out.exists()
    assert cli_main(["trace", "import", str(DATA / "openai_log.jsonl"), "-o", str(out), "--strict"]) == 0


def test_cli_unknown_shape_exits_2_with_a_clean_message(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "events.jsonl"
    shutil.copy(DATA / "unknown_shape.jsonl", log)
    assert cli_main(["trace", "import", str(log), "-o", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-engine trace import: error: ") and "events.jsonl" in err
    assert "Traceback" not in err


def test_cli_help_and_nothing_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["trace", "import", "--help"])
    assert e.value.code == 0 and "--report-json" in capsys.readouterr().out
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"job_id": "x", "turns": []}\n')
    assert cli_main(["trace", "import", str(empty), "-o", str(tmp_path / "t.jsonl")]) == 1
    assert "no job left" in capsys.readouterr().err
