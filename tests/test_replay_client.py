"""The replay client against a tiny in-process fake of ``POST /v1/completions`` (http.server, 127.0.0.1).

The fake generates deterministic ids from the prompt, reports the longest common prefix with the job's
previous prompt plus its generated ids as ``cached_tokens``, and records every request with its arrival time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent_engine.cli.main import main as cli_main
from agent_engine.workloads.replay import ReplayOptions, arrival_times, plan_job, replay_sync
from agent_engine.workloads.replay.records import JobRecord, read_records
from agent_engine.workloads.traces import TraceJob, TraceTurn, load_trace, write_jobs

PROMPTS = [100, 180, 260, 400]
OUTPUTS = [10, 20, 6, 8]
TOOLS = ["bash:ls", "bash:cat", "bash:pytest", "bash:echo"]
SECS = [0.05, 0.1, 0.02, None]


@dataclass
class Seen:
    t: float
    body: dict[str, Any]
    gen: list[int]


@dataclass
class FakeState:
    posts: list[Seen] = field(default_factory=list)
    deletes: list[tuple[float, str]] = field(default_factory=list)
    active: set[str] = field(default_factory=set)
    max_active: int = 0
    fail_jobs: set[str] = field(default_factory=set)
    queue_field: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _gen(prompt: list[int], n: int) -> list[int]:
    return [20 + (len(prompt) * 7 + sum(prompt[-3:]) + 13 * k) % 900 for k in range(n)]


def _send_json(h: BaseHTTPRequestHandler, code: int, obj: dict[str, Any]) -> None:
    data = json.dumps(obj).encode()
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _send_stream(h: BaseHTTPRequestHandler, gen: list[int], tail: dict[str, Any]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.end_headers()  # HTTP/1.0: the body ends when the connection closes
    for tid in gen:
        h.wfile.write(f"data: {json.dumps({'choices': [{'text': 'x', 'token_ids': [tid]}]})}\n\n".encode())
    h.wfile.write(f"data: {json.dumps({'choices': [], **tail})}\n\n".encode())
    h.wfile.write(b"data: [DONE]\n\n")


def _post(h: BaseHTTPRequestHandler, state: FakeState) -> None:
    """One completion: deterministic ids; cached tokens = common prefix with the job's last prompt+ids."""
    body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
    prompt, job = body["prompt"], body["job_id"]
    gen = _gen(prompt, body["max_tokens"])
    with state.lock:
        prev = [s.body["prompt"] + s.gen for s in state.posts if s.body["job_id"] == job]
        state.posts.append(Seen(time.monotonic(), body, gen))
        state.active.add(job)
        state.max_active = max(state.max_active, len(state.active))
    if job in state.fail_jobs and prev:
        _send_json(h, 500, {"error": {"message": "boom"}})
        return
    cached = 0
    if prev:
        p = prev[-1]
        while cached < min(len(p), len(prompt)) and p[cached] == prompt[cached]:
            cached += 1
    usage = {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(gen),
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    extra = {"metrics": {"queue_delay": 0.001}} if state.queue_field else {}
    if body.get("stream"):
        _send_stream(h, gen, {"usage": usage, **extra})
    else:
        choice = {"index": 0, "text": "x" * len(gen), "token_ids": gen}
        _send_json(h, 200, {"choices": [choice], "usage": usage, **extra})


def _handler(state: FakeState) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_DELETE(self) -> None:  # noqa: N802
            job = self.path.rsplit("/", 1)[-1]
            with state.lock:
                state.deletes.append((time.monotonic(), job))
                state.active.discard(job)
            _send_json(self, 200, {"job_id": job, "released": True})

        def do_POST(self) -> None:  # noqa: N802
            _post(self, state)

    return H


@pytest.fixture
def fake() -> Iterator[tuple[str, FakeState]]:
    state = FakeState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def _trace(n_jobs: int) -> list[TraceJob]:
    return [
        TraceJob(
            f"trace/job/{j}",
            [
                TraceTurn(p, o, tool_name=t, tool_seconds=s)
                for p, o, t, s in zip(PROMPTS, OUTPUTS, TOOLS, SECS, strict=True)
            ],
        )
        for j in range(n_jobs)
    ]


def _by_job(state: FakeState) -> dict[str, list[Seen]]:
    out: dict[str, list[Seen]] = {}
    for s in state.posts:
        out.setdefault(s.body["job_id"], []).append(s)
    return out


@pytest.mark.core
@pytest.mark.parametrize("stream", [True, False])
def test_closed_loop_prompts_hints_sleeps_and_records(fake: tuple[str, FakeState], stream: bool) -> None:
    url, state = fake
    opts = ReplayOptions(token_scale=0.5, time_scale=2.0, seed=1, stream=stream, progress=False, model="m")
    res = replay_sync(url, _trace(3), opts)
    jobs = _by_job(state)
    assert sorted(jobs) == ["replay1-00000", "replay1-00001", "replay1-00002"]
    assert sorted(job for _, job in state.deletes) == sorted(jobs)
    firsts = [seen[0].body["prompt"][:2] for seen in jobs.values()]
    assert len({tuple(f) for f in firsts}) == 3  # job-unique prefixes
    for job_id, seen in jobs.items():
        assert [len(s.body["prompt"]) for s in seen] == [50, 90, 130, 200]  # trace prompts * 0.5
        assert [s.body["max_tokens"] for s in seen] == [5, 10, 3, 4]
        assert [s.body["is_last_step"] for s in seen] == [False, False, False, True]
        assert [s.body["tool_name"] for s in seen] == TOOLS
        for s in seen:
            b = s.body
            assert (b["temperature"], b["ignore_eos"], b["return_token_ids"]) == (0, True, True)
            assert b["model"] == "m"
            assert b["stream"] is stream and (("stream_options" in b) is stream)
            assert all(16 <= t < 4000 for t in b["prompt"])
        for i in range(3):
            prev, nxt = seen[i], seen[i + 1]
            assert (
                nxt.body["prompt"][: len(prev.body["prompt"]) + len(prev.gen)]
                == prev.body["prompt"] + prev.gen
            )
            gap = nxt.t - prev.t
            assert 2.0 * SECS[i] - 0.01 <= gap <= 2.0 * SECS[i] + 0.5, (job_id, i, gap)
        delete_t = next(t for t, j in state.deletes if j == job_id)
        assert delete_t >= seen[-1].t
    turns, recs = res.turns, res.jobs
    assert len(turns) == 12 and len(recs) == 3
    assert all(r.error is None for r in turns + recs)  # type: ignore[operator]
    for t in turns:
        assert t.output_tokens == t.max_tokens and t.latency is not None and t.latency >= 0
        assert (t.ttft is not None) is stream
        assert t.queue_source == ("ttft" if stream else None)
    assert [t.cached_tokens for t in turns if t.job_id == "replay1-00000"] == [0, 55, 100, 133]
    for j in recs:
        assert j.turns == 4 and j.jct is not None and j.jct >= 2.0 * sum(SECS[:3]) - 0.01
    s = res.summary
    assert s["jobs_completed"] == 3 and s["jobs_failed"] == 0
    assert s["prefix_hit_ratio"] == pytest.approx(3 * (55 + 100 + 133) / (3 * (50 + 90 + 130 + 200)))


@pytest.mark.core
def test_concurrency_caps_jobs_in_flight(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    opts = ReplayOptions(concurrency=2, time_scale=0.0, max_turns=2, token_scale=0.1, progress=False)
    res = replay_sync(url, _trace(6), opts)
    assert state.max_active == 2
    assert res.summary["jobs_completed"] == 6 and res.summary["jobs_truncated"] == 6
    for seen in _by_job(state).values():
        assert [s.body["is_last_step"] for s in seen] == [False, True]


@pytest.mark.core
def test_server_queue_field_failure_and_delete(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    state.queue_field = True
    state.fail_jobs.add("x-00001")
    opts = ReplayOptions(time_scale=0.0, token_scale=0.1, job_id_prefix="x-", progress=False)
    res = replay_sync(url, _trace(2), opts)
    assert sorted(job for _, job in state.deletes) == ["x-00000", "x-00001"]  # the failed job too
    bad = [j for j in res.jobs if j.job_id == "x-00001"][0]
    assert bad.error is not None and "HTTP 500" in bad.error and bad.jct is None and bad.turns == 1
    assert res.summary["jobs_failed"] == 1 and res.summary["jobs_completed"] == 1
    good = [t for t in res.turns if t.job_id == "x-00000"]
    assert all(t.queue_source == "server" and t.queue_delay == pytest.approx(0.001) for t in good)


@pytest.mark.core
def test_max_model_len_truncates_with_last_step(fake: tuple[str, FakeState]) -> None:
    job = _trace(1)[0]
    plan = plan_job(job, 0, ReplayOptions(max_model_len=200))
    assert [(t.prompt_len, t.max_tokens, t.is_last_step) for t in plan.turns] == [
        (100, 10, False),
        (180, 20, True),
    ]
    assert plan.truncated and plan.turns[-1].sleep_s == 0.0 and plan.turns[0].sleep_s == pytest.approx(0.05)
    tiny = plan_job(job, 0, ReplayOptions(max_model_len=50))  # even turn 0 is cut to fit
    assert [(t.prompt_len, t.max_tokens, t.is_last_step) for t in tiny.turns] == [(40, 10, True)]
    url, state = fake
    res = replay_sync(url, [job], ReplayOptions(max_model_len=200, time_scale=0.0, progress=False))
    assert [s.body["is_last_step"] for s in state.posts] == [False, True]
    assert all(len(s.body["prompt"]) + s.body["max_tokens"] <= 200 for s in state.posts)
    assert res.jobs[0].truncated and res.jobs[0].trace_turns == 4


@pytest.mark.core
def test_poisson_arrivals() -> None:
    a = arrival_times(4000, ReplayOptions(jps=10.0, seed=3))
    assert a == arrival_times(4000, ReplayOptions(jps=10.0, seed=3)) and a[0] == 0.0
    gaps = np.diff(a)
    assert abs(gaps.mean() - 0.1) < 0.01 and abs(gaps.std() - 0.1) < 0.015  # exponential: std == mean
    assert arrival_times(3, ReplayOptions()) == [0.0, 0.0, 0.0]


@pytest.mark.core
def test_poisson_replay_spreads_job_starts(fake: tuple[str, FakeState]) -> None:
    url, state = fake
    opts = ReplayOptions(jps=20.0, seed=2, time_scale=0.0, token_scale=0.05, max_turns=1, progress=False)
    res = replay_sync(url, _trace(8), opts)
    planned = arrival_times(8, opts)
    starts = sorted((j.start_at or 0.0) for j in res.jobs)
    assert all(s >= p - 0.005 for s, p in zip(starts, planned, strict=True))
    assert starts[-1] >= planned[-1] - 0.005 and len(state.posts) == 8


@pytest.mark.core
def test_cli_replay_writes_records(
    fake: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = fake
    trace, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    write_jobs(trace, _trace(3))
    argv = ["replay", "--url", url, "--trace", str(trace), "--concurrency", "2", "--jobs", "2",
            "--token-scale", "0.1", "--time-scale", "0", "--seed", "4", "--no-progress", "--out", str(out)]
    assert cli_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["jobs_completed"] == 2 and summary["turns"] == 8
    recs = read_records(out)
    assert sum(isinstance(r, JobRecord) for r in recs) == 2 and len(recs) == 10
    assert {s.body["job_id"] for s in state.posts} == {"replay4-00000", "replay4-00001"}


@pytest.mark.core
def test_cli_replay_defaults_to_the_shipped_trace(
    fake: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = fake
    out = tmp_path / "r.jsonl"
    argv = ["replay", "--url", url, "--jobs", "2", "--max-turns", "2", "--token-scale", "0.01",
            "--time-scale", "0", "--no-progress", "--out", str(out)]
    assert cli_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["jobs_completed"] == 2 and summary["turns"] == 4
    assert {s.body["tool_name"] for s in state.posts} <= {t.tool_name for j in load_trace() for t in j.turns}
