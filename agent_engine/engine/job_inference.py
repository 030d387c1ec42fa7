"""The engine's side of job inference: give every hint-less request a job, from the prefix chain.

Under CONTINUUM (and ``EngineConfig.infer_jobs``), a request that arrives without a job joins the job
whose last finished turn its prompt extends (``scheduler.job_index.JobIndex``), or starts a new
inferred job. Its turns are then scheduled as a job's (program-level FCFS, pins), with two
differences that come from nobody having said what the job is: until the job is confirmed (its turns
strongly joined it ``CONFIRMED_JOINS`` times: then it is pinned like a declared job), a finished
turn is pinned as a cheap, wholly soft lease (``Request.job_inferred``); and a turn whose output
issued no tool call is taken as probably final (``JobHooks`` gives it only the shortest lease). With no last-step signal an
inferred job ends when it is forgotten: idle for ``MAX_IDLE_S`` or pushed out of the bounded index; the
job table publishes that (``JobTable.abandon``) to its listeners (the estimator ends the job).

Invariants: only requests without a client job are touched; an inferred job is in the index only
between its turns (its strong joins ride on its running request meanwhile); a job the index forgets
is abandoned on the job table as of its last turn's finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from agent_engine.engine.engine_stats import InferenceStats
from scheduler import Request, RequestStatus
from scheduler.job_index import JobIndex
from scheduler.job_table import MAX_JOBS

# A hint-less job not continued for this long is over: its JCT ends at its last turn's finish.
MAX_IDLE_S = 600.0
# Strong joins (the previous turn's prompt and output both continued) after which an inferred job is
# pinned like a declared one: two turns that each extended the whole previous conversation.
CONFIRMED_JOINS = 2


class JobAbandoner(Protocol):
    """Where a job nobody will continue is published (the scheduler's ``JobTable``)."""

    def abandon(self, job_id: str, at: float) -> object: ...


class ChatTokenizer(Protocol):
    """A tokenizer with a chat template, as ``generation_prompt_len`` reads it."""

    chat_template: str | None

    def apply_chat_template(self, conversation: Sequence[Mapping[str, str]], *, add_generation_prompt: bool,
                            tokenize: bool) -> str: ...

    def __call__(self, text: str) -> Mapping[str, list[int]]: ...


class JobInference:
    """Assigns inferred jobs to hint-less requests and remembers finished inferred turns."""

    def __init__(self, block_size: int, jobs: JobAbandoner, max_jobs: int = MAX_JOBS,
                 max_idle_s: float = MAX_IDLE_S, tokenizer: ChatTokenizer | None = None) -> None:
        self.index = JobIndex(block_size, max_jobs=max_jobs, prompt_slack=generation_prompt_len(tokenizer))
        self.jobs = jobs
        self.max_idle_s = max_idle_s

    def assign(self, req: Request) -> None:
        """Give ``req`` (no client job) the job it continues, or a new one; marks it inferred."""
        self._end(self.index.expire(req.arrival_time - self.max_idle_s))
        match = self.index.match(req.prompt_token_ids, req.block_hashes, owner=req.tenant)
        if match is None:
            req.join_inferred_job(self.index.new_job_id())
            return
        req.join_inferred_job(match.job_id, confirmed=match.strong_joins >= CONFIRMED_JOINS,
                              strong_joins=match.strong_joins)

    def on_finished(self, req: Request) -> None:
        """Index a finished turn of an inferred job so its next turn finds it (aborted turns are not)."""
        if not req.job_inferred or req.job_id is None or req.status is RequestStatus.FINISHED_ABORTED:
            return
        n_prompt = req.num_prompt_tokens
        prompt_hashes = req.block_hashes[: n_prompt // req.block_size]
        finished_at = req.finished_time if req.finished_time is not None else req.arrival_time
        self._end(self.index.record(req.job_id, prompt_hashes, req.all_token_ids, n_prompt, finished_at,
                                    owner=req.tenant, strong_joins=req.strong_joins))

    def _end(self, forgotten: list[tuple[str, float]]) -> None:
        for job_id, last_finish in forgotten:
            self.jobs.abandon(job_id, last_finish)

    def stats(self) -> InferenceStats:
        return InferenceStats(**self.index.stats.as_dict(), indexed_jobs=len(self.index))


def generation_prompt_len(tokenizer: ChatTokenizer | None) -> int:
    """Tokens the chat template adds to open the assistant's answer (0 without a chat template)."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return 0
    messages = [{"role": "user", "content": "x"}]
    try:
        bare, opened = (tokenizer.apply_chat_template(messages, add_generation_prompt=g, tokenize=False)
                        for g in (False, True))
        return max(0, len(tokenizer(opened)["input_ids"]) - len(tokenizer(bare)["input_ids"]))
    except Exception:  # noqa: BLE001 - a template that cannot render this gets no slack
        return 0

