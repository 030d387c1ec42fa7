"""Each judged attempt's conversation lands on disk with its verdict, under a safe name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_agent_attempts import TASK, HotterFixes

from agent_engine.agent.attempts import AttemptPolicy
from agent_engine.agent.job_runner import RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig
from agent_engine.agent.transcripts import transcript_name

pytestmark = pytest.mark.core


def test_every_attempt_is_written_with_its_verdict_and_messages(tmp_path: Path) -> None:
    folder = tmp_path / "transcripts"
    options = RunOptions("http://fake", AgentConfig(step_limit=4, max_tokens=32), concurrency=1,
                         command_timeout=20, progress=False, job_id_prefix="t-", transport=HotterFixes().transport(),
                         attempts=AttemptPolicy(3), transcripts=str(folder))
    result = run_agent_jobs_sync([TASK], options)
    assert result.results[0].job.solved is True
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["t-0.attempt1.json", "t-0.attempt2.json"]  # no temporary file left beside them
    first, second = (json.loads((folder / f).read_text()) for f in files)
    assert (first["solved"], second["solved"]) == (False, True)
    assert first["task_name"] == TASK.name and first["verdict"] and second["attempt"] == 2
    assert any("calc.py" in json.dumps(m) for m in first["messages"])  # the conversation itself
    assert first["messages"][0]["role"] == "system"


def test_a_job_id_never_names_a_file_outside_the_folder() -> None:
    for job_id in ("../../etc/passwd", "/abs/path", "..", "a/b\\c d"):
        name = transcript_name(job_id, 1)
        assert "/" not in name and "\\" not in name and not name.startswith(".")
