"""Job inference without hints: a request joins the job whose last finished turn its prompt extends.

An agent re-sends its whole conversation each turn, so turn k+1's prompt starts with turn k's prompt
and output. ``JobIndex`` remembers, per job, the tokens of its last finished turn under the chained
hash of that turn's last full prompt block; a new prompt is looked up by its own block hashes (one dict
lookup per block, longest prefix first: no scan of jobs), then the candidate is confirmed token by
token.

Invariants:
- A match never crosses owners (tenants), even where their prefix caches are shared.
- A match covers the candidate turn's whole prompt (but for its last ``prompt_slack`` tokens: the
  generation prompt a retry replaces), and the new prompt goes on past it. A strong match
  also covers at least ``min_output_fraction`` of its output (at least one token when it had any); a
  weak match does not (the client dropped that answer and asked again, as mini-swe-agent does after a
  format error) and is taken only when no strong one exists. Either way two jobs that only share a
  system prompt, or any prefix shorter than a whole previous turn, never merge: a job's prompt holds
  its own first user message.
- A job is in the index at most once (its latest finished turn) and leaves it when a request joins
  it (re-entering when that turn finishes), so two identical concurrent requests never join one job.
- At most ``max_jobs`` jobs are remembered; the least recently finished is forgotten first and
  reported by ``record`` so the caller can end it; ``expire`` forgets jobs idle too long the same way.
- Prompts shorter than one block are never matched nor indexed (nothing to key them by).
- A job's strong joins (``JobMatch.strong_joins``: how often the prefix chain, output included, has
  vouched for it) travel with its turn: kept on its indexed turn while it waits, handed to the joining
  request by ``match`` and back to ``record`` with the finished turn (``Request.strong_joins``), so they
  are bounded with the index and no count outlives its job.
- New job ids are unguessable (``inferred-`` + 64 random bits from ``secrets``): a client cannot name,
  and so cannot release, a job inferred for another client.
"""

from __future__ import annotations

import math
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scheduler.job_table import MAX_JOBS

__all__ = ["JobIndex", "JobMatch", "JobInferenceStats"]


@dataclass(frozen=True)
class JobMatch:
    """A hint-less prompt continues ``job_id``; ``matched_tokens`` of it equal that job's last turn."""

    job_id: str
    matched_tokens: int
    strong_joins: int = 0  # this job's strong joins so far, this one included


@dataclass
class JobInferenceStats:
    """Counters: joins (matched a job; ``weak_joins`` of them without the previous output), new jobs
    (no match), the matched prefix lengths, jobs forgotten."""

    joins: int = 0
    weak_joins: int = 0
    new_jobs: int = 0
    matched_tokens: int = 0
    forgotten: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Turn:
    key: int
    tokens: tuple[int, ...]
    num_prompt_tokens: int
    finished_at: float
    owner: str | None = None
    strong_joins: int = 0


@dataclass
class JobIndex:
    block_size: int
    max_jobs: int = MAX_JOBS
    min_output_fraction: float = 0.5
    # Tokens at the end of a prompt that the next prompt may replace: the chat template's generation
    # prompt (``<|im_start|>assistant\n``), absent when the client drops the answer and asks again.
    prompt_slack: int = 0
    stats: JobInferenceStats = field(default_factory=JobInferenceStats)
    _turns: OrderedDict[str, _Turn] = field(default_factory=OrderedDict)
    _by_key: dict[int, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if not 0.0 <= self.min_output_fraction <= 1.0:
            raise ValueError("min_output_fraction must be in [0, 1]")
        if self.prompt_slack < 0:
            raise ValueError("prompt_slack must be >= 0")

    def __len__(self) -> int:
        return len(self._turns)

    def match(self, prompt: Sequence[int], block_hashes: Sequence[int],
              owner: str | None = None) -> JobMatch | None:
        """The job of ``owner`` (a tenant) this prompt continues (removed from the index: it is running
        again), or None. A strong match (the previous output covered) beats a weak one (only the whole
        previous prompt covered: a client that dropped the answer and retried); then the longest wins."""
        best: tuple[bool, int, str] | None = None
        for i in range(len(block_hashes) - 1, -1, -1):
            for job_id in self._by_key.get(block_hashes[i], ()):
                turn = self._turns[job_id]
                if turn.owner != owner:
                    continue
                matched, strong = self._confirm(turn, prompt)
                if matched and (best is None or (strong, matched) > best[:2]):
                    best = (strong, matched, job_id)
        if best is None:
            return None
        strong, matched, job_id = best
        joins = self._turns[job_id].strong_joins + strong
        self._forget(job_id)
        self.stats.joins += 1
        self.stats.weak_joins += not strong
        self.stats.matched_tokens += matched
        return JobMatch(job_id, matched, joins)

    def new_job_id(self) -> str:
        """A fresh id for a hint-less request that continues no job."""
        self.stats.new_jobs += 1
        while True:
            job_id = f"inferred-{secrets.token_hex(8)}"
            if job_id not in self._turns:
                return job_id

    def record(self, job_id: str, prompt_block_hashes: Sequence[int], tokens: Sequence[int],
               num_prompt_tokens: int, finished_at: float = 0.0,
               owner: str | None = None, strong_joins: int = 0) -> list[tuple[str, float]]:
        """Remember ``job_id``'s finished turn (``tokens`` = its prompt + output, finished at
        ``finished_at``, never earlier than the last recorded turn's; ``strong_joins``: the job's so far,
        as its turn carried them); returns ``(job, finished_at)`` of the jobs forgotten to stay within
        ``max_jobs`` (the caller ends them)."""
        self._forget(job_id)
        n_full = self._vouched(num_prompt_tokens) // self.block_size
        if n_full == 0 or len(prompt_block_hashes) < n_full:
            return []
        key = prompt_block_hashes[n_full - 1]
        self._turns[job_id] = _Turn(key, tuple(tokens), num_prompt_tokens, finished_at, owner, strong_joins)
        self._by_key.setdefault(key, []).append(job_id)
        return self._forget_oldest(lambda turn: len(self._turns) > self.max_jobs)

    def expire(self, idle_before: float) -> list[tuple[str, float]]:
        """Forget the jobs whose last turn finished before ``idle_before``; returns them as ``record``."""
        return self._forget_oldest(lambda turn: turn.finished_at < idle_before)

    def _forget_oldest(self, while_: Callable[[_Turn], bool]) -> list[tuple[str, float]]:
        gone = []
        while self._turns:
            job_id, turn = next(iter(self._turns.items()))
            if not while_(turn):
                break
            self._forget(job_id)
            self.stats.forgotten += 1
            gone.append((job_id, turn.finished_at))
        return gone

    def forget(self, job_id: str) -> None:
        """Drop ``job_id`` (it ended); a no-op for unknown jobs."""
        self._forget(job_id)

    def _confirm(self, turn: _Turn, prompt: Sequence[int]) -> tuple[int, bool]:
        """``(tokens of prompt equal to turn's, strong)``: strong when that covers the turn's prompt and
        enough of its output; weak when it covers the whole prompt and the new prompt goes on past it
        with something else; ``(0, False)`` otherwise."""
        n_prompt, tokens = turn.num_prompt_tokens, turn.tokens
        n_output = len(tokens) - n_prompt
        need = n_prompt + (max(1, math.ceil(self.min_output_fraction * n_output)) if n_output else 0)
        weak_need = n_prompt - self.prompt_slack
        if len(prompt) <= weak_need:
            return 0, False
        matched = self._vouched(n_prompt) // self.block_size * self.block_size  # the hash chain's part
        limit = min(len(prompt), len(tokens))
        while matched < limit and prompt[matched] == tokens[matched]:
            matched += 1
        if matched >= need:
            return matched, True
        return (matched, False) if matched >= weak_need and len(prompt) > matched else (0, False)

    def _vouched(self, num_prompt_tokens: int) -> int:
        """The prompt tokens a next prompt must repeat exactly (all but the slack)."""
        return max(0, num_prompt_tokens - self.prompt_slack)

    def _forget(self, job_id: str) -> None:
        turn = self._turns.pop(job_id, None)
        if turn is None:
            return
        jobs = self._by_key[turn.key]
        jobs.remove(job_id)
        if not jobs:
            del self._by_key[turn.key]
