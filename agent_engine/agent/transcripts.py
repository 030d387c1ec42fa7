"""Each attempt's whole conversation on disk, with its verdict: what a user reads to see why a job failed.

Invariants:
- One JSON file per attempt, ``<job id>.attempt<k>.json`` (``k`` from 1) in the run's transcript
  folder, written when the attempt has been judged; the job id is made a safe file name first (only
  letters, digits, ``-``, ``_`` and ``.`` kept), so no id can name a file outside the folder.
- The file holds the job id, the task's name and text, the attempt number, the exit status, whether
  the check passed (``solved``; None without a check), the judge's reason, the steps, and the messages
  exactly as the model was sent them (tool calls included).
- Writing is atomic (a temporary file renamed into place); a folder that cannot be written raises
  ``OSError`` from ``TranscriptWriter`` before any job starts.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from agent_engine.agent.loop import AgentJobResult

__all__ = ["TranscriptWriter", "transcript_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def transcript_name(job_id: str, attempt: int) -> str:
    """The file name of attempt ``attempt`` (1-based) of job ``job_id``."""
    stem = _UNSAFE.sub("_", job_id).strip(".") or "job"
    return f"{stem[:120]}.attempt{attempt}.json"


class TranscriptWriter:
    """Writes attempts' transcripts into one folder (created when missing)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        if not os.access(self.folder, os.W_OK):
            raise OSError(f"cannot write transcripts into {self.folder}")

    def write(self, result: AgentJobResult, attempt: int) -> Path:
        """Write one judged attempt; returns the file's path."""
        job = result.job
        doc = {"job_id": job.job_id, "task_name": job.task_name, "task": job.task, "attempt": attempt,
               "exit_status": job.exit_status, "solved": job.solved, "verdict": job.verdict, "steps": job.steps,
               "error": job.error, "messages": result.messages}
        path = self.folder / transcript_name(job.job_id, attempt)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".transcript-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
