"""Replay records: ``summarize`` over hand-made records, and the records file round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_engine.workloads.replay.records import (
    JobRecord,
    TurnRecord,
    read_records,
    summarize,
    write_records,
)


def _hand_made_records() -> list[TurnRecord | JobRecord]:
    return [
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


@pytest.mark.core
def test_summarize_hand_made_records(tmp_path: Path) -> None:
    recs = _hand_made_records()
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
