"""The engine's side of job inference: give every hint-less request a job, from the prefix chain.

Under CONTINUUM (and ``EngineConfig.infer_jobs``), a request that arrives without a job joins the job
whose last finished turn its prompt extends (``scheduler.job_inference.JobIndex``), or starts a new
inferred job. Its turns are then scheduled as a job's (program-level FCFS, pins), with two
differences that come from nobody having said what the job is: a finished turn is pinned as a cheap,
wholly soft lease (``Request.job_inferred``), and a turn whose output issued no tool call is taken
as probably final (``JobHooks`` ends the job instead of pinning it).

Invariants: only requests without a client job are touched; an inferred job is in the index only
between its turns; a job the index forgets to stay bounded is ended with the estimator.
"""

from __future__ import annotations

from typing import Any

from scheduler import Request, RequestStatus
from scheduler.job_inference import JobIndex

INFERRED = "inferred"


class JobInference:
    """Assigns inferred jobs to hint-less requests and remembers finished inferred turns."""

    def __init__(self, block_size: int, job_hooks: Any, max_jobs: int = 10_000) -> None:
        self.index = JobIndex(block_size, max_jobs=max_jobs)
        self.job_hooks = job_hooks

    def assign(self, req: Request) -> None:
        """Give ``req`` (no client job) the job it continues, or a new one; marks it inferred."""
        match = self.index.match(req.prompt_token_ids, req.block_hashes)
        req.job_id = match.job_id if match is not None else self.index.new_job_id()
        req.job_inferred = True

    def on_finished(self, req: Request) -> None:
        """Index a finished turn of an inferred job so its next turn finds it (aborted turns are not)."""
        if not req.job_inferred or req.job_id is None or req.status is RequestStatus.FINISHED_ABORTED:
            return
        n_prompt = req.num_prompt_tokens
        prompt_hashes = req.block_hashes[: n_prompt // req.block_size]
        for job_id in self.index.record(req.job_id, prompt_hashes, req.all_token_ids, n_prompt):
            self.job_hooks.end_job(job_id)

    def stats(self) -> dict[str, Any]:
        return {**self.index.stats.as_dict(), "indexed_jobs": len(self.index)}
