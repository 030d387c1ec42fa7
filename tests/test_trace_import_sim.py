"""End to end: ``agent-engine trace import`` on a synthetic OpenAI-style log, then ``agent-engine sim``
on the imported trace, both as subprocesses (the simulator is fast; no server is started).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

T0 = 1_700_000_000.0


def _call(job: int, turn: int, t: float, prompt: int, compact: bool) -> dict:
    """One chat-completion call; job 0 compacts its context at turn 3, job 1 logs no end time at turn 1."""
    cmd = ["pytest -q", "grep -rn foo .", "sed -n 1,20p a.py", "ls"][turn % 4]
    line = {
        "session_id": f"s{job}", "start_time": t, "end_time": t + 1.5,
        "request": {"messages": [{"role": "user", "content": f"task {job}"}] * (1 + turn)},
        "response": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}
        ]}}], "usage": {"prompt_tokens": prompt // 3 if compact else prompt, "completion_tokens": 40}},
    }
    if job == 1 and turn == 1:
        del line["end_time"]
    return line


def _write_log(path: Path, jobs: int = 6, turns: int = 5) -> None:
    lines = []
    for j in range(jobs):
        prompt, t = 800, T0 + 7.0 * j
        for k in range(turns):
            compact = j == 0 and k >= 3
            lines.append(_call(j, k, t, prompt, compact))
            prompt, t = prompt + 300, t + 1.5 + 2.0 + k
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_engine.cli.main", *args], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])


def test_imported_log_runs_in_the_simulator(tmp_path: Path) -> None:
    log, trace, report, sim = (tmp_path / n for n in ("log.jsonl", "trace.jsonl", "report.json", "sim.json"))
    _write_log(log)
    r = _cli("trace", "import", str(log), "-o", str(trace), "--report-json", str(report), "--strict")
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    assert (rep["jobs_kept"], rep["segments_split"], rep["tool_times_imputed"]) == (7, 1, 1)
    r = _cli("sim", "--trace", str(trace), "--jobs", "7", "--jps-list", "0.5", "--workers", "1", "--no-progress",
             "--json", str(sim), "--plot", str(tmp_path / "sim.png"))
    assert r.returncode == 0, r.stderr
    result = json.loads(sim.read_text())
    for policy in ("fcfs", "continuum"):
        assert result["policies"][policy]["jobs"] == 7
        assert result["policies"][policy]["mean_jct_s"] > 0
