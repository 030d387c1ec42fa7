"""End to end: the live agent CLI against our real server, with a tiny model that really issues commands.

No mocked HTTP: a tiny Llama is overfitted in seconds on scripted agent transcripts (ls -> find | wc -l
-> submit), served by ``agent_engine.server.serve`` in a subprocess, and driven by ``agent-engine agent``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_fixtures import start_subprocess_server

from agent_engine.agent.job_runner import AgentTask, RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig, AgentJobRecord, AgentTurnRecord
from agent_engine.agent.text_interface import SUBMIT_COMMAND
from agent_engine.agent.tiny_agent_model import SCRIPTS, build_tiny_agent_model
from agent_engine.cli.main import main as cli_main
from agent_engine.server.launcher import ServerProcess
from agent_engine.workloads.replay.records import read_records, summarize
from agent_engine.workloads.traces.format import read_jobs, validate_job

pytestmark = pytest.mark.slow

SCRIPT = SCRIPTS[0]
EXPECTED_TOOLS = ["bash:ls", "bash:find", "bash:echo"]


@pytest.fixture(scope="session")
def tiny_agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-agent-model")
    t = time.perf_counter()
    report = build_tiny_agent_model(out)
    print(f"\ntiny agent model: {report} (wall {time.perf_counter() - t:.1f} s)")
    assert report.margin > 0, f"the tiny model did not learn its script: {report}"
    return out


@pytest.fixture(scope="module")
def server(tiny_agent_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("agent-server") / "server.log"
    srv = start_subprocess_server(["--model", str(tiny_agent_dir), "--num-kv-blocks", "256",
                                   "--max-model-len", "1024"], log)
    try:
        yield srv
    finally:
        srv.stop(timeout=5)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "main.py").write_text("print('hi')\n")
    (r / "pkg" / "util.py").write_text("X = 1\n")
    (r / "README.md").write_text("# demo\n")
    return r


def _metric(text: str, name: str, label: str = "") -> float:
    """The sum of ``name``'s samples whose labels include ``label`` (every series carries a tenant)."""
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") and label in line]
    family = name.removesuffix("_total").removesuffix("_count")
    if not values and f"# TYPE {family} " not in text:
        raise AssertionError(f"metric {name} missing")
    return sum(values)


def test_agent_cli_end_to_end(server: ServerProcess, repo: Path, tmp_path: Path) -> None:
    out, trace = tmp_path / "records.jsonl", tmp_path / "trace.jsonl"
    t = time.perf_counter()
    rc = cli_main(["agent", "--interface", "text", "--base-url", server.base_url, "--repo", str(repo),
                   "--task", SCRIPT.task, "--jobs", "2", "--concurrency", "2", "--step-limit", "3", "--max-tokens", "64",
                   "--temperature", "0", "--command-timeout", "10", "--job-id-prefix", "e2e-",
                   "--out", str(out), "--save-trace", str(trace), "--no-progress"])
    assert rc == 0
    assert time.perf_counter() - t < 60

    records = read_records(out)
    jobs = [r for r in records if not hasattr(r, "turn")]
    turns = [r for r in records if hasattr(r, "turn")]
    assert sorted(j.job_id for j in jobs) == ["e2e-0", "e2e-1"]
    raw = [json.loads(line) for line in out.read_text().splitlines()]
    for d in raw:
        if d["kind"] == "job":
            assert d["exit_status"] == "Submitted" and d["steps"] == 3 and d["error"] is None
            assert d["jct"] > 0 and d["format_errors"] == 0
    by_job: dict[str, list[dict]] = {}
    for d in raw:
        if d["kind"] == "turn":
            by_job.setdefault(d["job_id"], []).append(d)
    for job_id, ts in by_job.items():
        assert [d["tool_name"] for d in ts] == EXPECTED_TOOLS
        assert [d["command"] for d in ts] == list(SCRIPT.commands)
        assert [d["exit_code"] for d in ts] == [0, 0, 0]
        assert [d["is_last_step"] for d in ts] == [False, False, True]
        assert ts[-1]["submitted"] and not any(d["submitted"] for d in ts[:-1])
        for d in ts:
            assert d["error"] is None and d["echoed_job_id"] == job_id  # the server saw the job hint
            assert d["done_at"] >= d["sent_at"] and d["latency"] > 0
            assert d["ttft"] is not None and 0 < d["ttft"] <= d["latency"]
            assert d["tool_seconds"] is not None and d["tool_seconds"] > 0
            assert d["prompt_tokens"] > 0 and d["output_tokens"] > 0 and d["cached_tokens"] is not None
        prompts = [d["prompt_tokens"] for d in ts]
        assert prompts == sorted(prompts)
    assert len(turns) == 6
    summary = summarize(records)
    assert summary["jobs_completed"] == 2 and summary["turns_failed"] == 0 and summary["cached_tokens"] > 0

    trace_jobs = read_jobs(trace)  # validates every line
    assert [j.job_id for j in trace_jobs] == ["e2e-0", "e2e-1"]
    for j in trace_jobs:
        assert not validate_job(j)
        assert len(j.turns) == 3 and j.meta["exit_status"] == "Submitted"
        assert [t.tool_name for t in j.turns] == EXPECTED_TOOLS
        assert j.turns[-1].tool_seconds is None and all(t.tool_seconds is not None for t in j.turns[:-1])
        assert j.turns[0].extra["tool_names"] == ["bash:ls"] and j.turns[0].extra["n_tool_calls"] == 1
    assert [json.loads(line) for line in trace.read_text().splitlines()] == [j.to_dict() for j in trace_jobs]

    metrics = httpx.get(server.base_url + "/metrics", timeout=10).text  # job hints reached the server
    assert _metric(metrics, "agent_engine_job_turns_by_hint_total", 'hint_source="job_id"') == 6
    assert _metric(metrics, "agent_engine_job_completion_seconds_count") == 2  # ended by is_last_step turns,
    assert _metric(metrics, "agent_engine_jobs_released_total") == 0  # so their DELETEs found no live job


def test_agent_runner_observations(server: ServerProcess, repo: Path) -> None:
    """The commands really ran in the sandbox: the observations carry their real outputs. The job submits
    before its last allowed step, so it is still live at its end: its DELETE releases it."""
    released = _metric(httpx.get(server.base_url + "/metrics", timeout=10).text, "agent_engine_jobs_released_total")
    options = RunOptions(server.base_url, AgentConfig(step_limit=5, max_tokens=64), concurrency=1,
                         command_timeout=10, progress=False)
    result = run_agent_jobs_sync([AgentTask(SCRIPT.task, str(repo), job_id="obs-0")], options)
    (res,) = result.results
    assert isinstance(res.job, AgentJobRecord) and res.job.exit_status == "Submitted"
    assert all(isinstance(t, AgentTurnRecord) and not t.is_last_step for t in res.turns)
    observations = [m["content"] for m in res.messages if m["role"] == "user"][1:]
    assert observations[0] == "<returncode>0</returncode>\n<output>\nREADME.md\nmain.py\npkg\n</output>"
    assert observations[1] == "<returncode>0</returncode>\n<output>\n2\n</output>"
    assert res.messages[-1] == {"role": "assistant", "content": f"```bash\n{SUBMIT_COMMAND}\n```"}
    assert sorted(p.name for p in repo.rglob("*")) == ["README.md", "main.py", "pkg", "util.py"]
    metrics = httpx.get(server.base_url + "/metrics", timeout=10).text
    assert _metric(metrics, "agent_engine_jobs_released_total") == released + 1


@pytest.mark.timeout(300)
def test_agent_tasks_benchmark_end_to_end(tmp_path: Path) -> None:
    """``bench agent-tasks`` on one shipped task x two policies (no hints: the server infers the job),
    the embedded model: real servers, a real agent (no mutants, so that the model works: one rewrite of
    one suspect first, then at most two agent calls), the task's check run in the job's sandbox."""
    from agent_engine.model.default_model import default_model_dir
    from benchmarks.agent_tasks import main as bench_main

    out = tmp_path / "agent_tasks.json"
    t = time.perf_counter()
    rc = bench_main(["--model", str(default_model_dir()), "--jobs", "1", "--policies", "fcfs,continuum", "--hints", "none", "--step-limit", "2",
                     "--rewrites", "1", "--rewrite-functions", "1", "--mutants", "0", "--max-tokens", "8", "--max-model-len", "2048", "--num-kv-blocks", "160",
                     "--engine-arg=--no-profile-reload-cost", "--log-dir", str(tmp_path / "logs"),
                     "--records-dir", str(tmp_path / "records"), "--json", str(out), "--no-progress"])
    print(f"\nbench agent-tasks: {time.perf_counter() - t:.1f} s")
    assert rc == 0
    written = json.loads(out.read_text())
    rows = written["rows"]
    assert written["complete"] and sorted(rows) == ["tools/continuum+hints=none", "tools/fcfs+hints=none"]
    for row in rows.values():
        assert (row["jobs"], row["checked"], row["jobs_failed"]) == (1, 1, 0)
        (job,) = row["job_outcomes"]
        assert job["task"] == "add_operator" and isinstance(job["solved"], bool)
        # one rewrite and one question about its one code line, then at most two agent calls
        assert row["solved"] == int(job["solved"]) and 1 <= row["mean_steps"] <= 4
        assert row["solved_by_rewrites"] in (0, 1) and row["attempts"] in (1, 2)
        assert row["interface"] == "tools" and row["format_errors"] >= 0 and row["output_tokens"] > 0
        assert row["mean_jct_s"] > 0 and row["p90_jct_s"] >= row["mean_jct_s"] * 0.999
        assert row["pins_hit"] is not None and row["prompt_tokens"] > 0
    assert rows["tools/fcfs+hints=none"]["pins_created"] == 0
    if rows["tools/continuum+hints=none"]["mean_steps"] >= 2:  # a second turn: the first one was pinned
        assert rows["tools/continuum+hints=none"]["pins_created"] >= 1
    assert (tmp_path / "records" / "tools-fcfs+hints=none.jsonl").is_file()
