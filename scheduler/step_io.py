"""Data that crosses the scheduler <-> runner <-> engine boundaries.

The model runner sees integer block ids only, never block objects. A ``ScheduledRequest`` is the
scheduler's own object for that request, refreshed in place (as are its ``block_ids`` lists) by
``update`` once the request has its next token, and by the next ``schedule()``: it is valid from
``schedule`` through ``execute``; whoever needs it during or after ``update`` reads it first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, overload

from scheduler.sampling_params import SamplingParams
from scheduler.tier_copy import KVCopy


@dataclass(slots=True)
class ScheduledRequest:
    """One request in one step: compute the tokens at ``num_computed_tokens + i`` for each ``token_ids[i]``.

    ``do_sample`` is True when this chunk reaches the request's last known token, so the runner
    samples exactly one new token for it.
    """

    request_id: str
    token_ids: list[int]
    num_computed_tokens: int
    block_ids: list[int]
    sampling_params: SamplingParams
    do_sample: bool
    # Tokens generated so far (for repetition-free seeded sampling and min_tokens handling).
    num_output_tokens: int = 0
    eos_token_id: int | None = None

    @property
    def num_scheduled_tokens(self) -> int:
        return len(self.token_ids)


@dataclass
class SchedulerOutput:
    """What the scheduler decided for one step."""

    scheduled: list[ScheduledRequest] = field(default_factory=list)
    # Requests that finished or were aborted since the last step: the runner drops their state.
    finished_req_ids: set[str] = field(default_factory=set)
    # Requests preempted in this step (their KV is gone; they will be recomputed).
    preempted_req_ids: set[str] = field(default_factory=set)
    # Requests admitted from the waiting queue this step (new or resumed after preemption).
    new_req_ids: list[str] = field(default_factory=list)
    resumed_req_ids: list[str] = field(default_factory=list)
    # Second-tier copies, in order, before the forward pass: ``(SAVE, block, slot)`` moves a pool block's
    # KV into a tier slot, ``(LOAD, slot, block)`` back (``scheduler.tier_copy``). May be non-empty with
    # nothing scheduled: a runner performs them even then.
    kv_copies: list[KVCopy] = field(default_factory=list)

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        """Nothing to compute (there may still be ``kv_copies`` to perform)."""
        return not self.scheduled

    def work(self) -> dict[str, float]:
        """What the step computes, for cost accounting: ``num_tokens`` (rows of the forward pass),
        ``num_reqs``, ``num_sampled`` (rows that reach the LM head), ``attention_pairs`` (causal
        query-key pairs: each new token attends to the request's earlier tokens and itself) and
        ``context_tokens`` (keys read per layer and KV head: each request's whole context, once)."""
        pairs = context = sampled = 0
        for s in self.scheduled:
            q, c = len(s.token_ids), s.num_computed_tokens
            pairs += q * c + q * (q + 1) // 2
            context += c + q
            sampled += s.do_sample
        return {"num_tokens": float(self.total_num_scheduled_tokens), "num_reqs": float(len(self.scheduled)),
                "num_sampled": float(sampled), "attention_pairs": float(pairs), "context_tokens": float(context)}


@dataclass
class ModelRunnerOutput:
    """What the runner computed: one sampled token per request whose chunk had ``do_sample``."""

    sampled_token_ids: dict[str, int] = field(default_factory=dict)
    logprobs: dict[str, float] = field(default_factory=dict)
    # Optional top-k alternatives per request: list of (token_id, logprob), best first.
    top_logprobs: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # Requests whose own sampling failed (request id -> why); the engine fails just these.
    failed: dict[str, str] = field(default_factory=dict)


class EngineCoreOutput(NamedTuple):
    """One request's part of a step, as ``StepOutputs`` hands it out: new tokens and, if it finished, why."""

    request_id: str
    new_token_ids: list[int]
    finish_reason: str | None = None
    # Empty tuples unless the request asked for logprobs (no per-token list allocation otherwise).
    new_logprobs: Sequence[float] = ()
    new_top_logprobs: Sequence[list[tuple[int, float]]] = ()

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


class StepOutputs(Sequence[EngineCoreOutput]):
    """What ``Scheduler.update`` returns: one new token for each request that got one this step, as
    columns (``request_ids[i]`` got ``token_ids[i]``), plus the reasons of those that finished and the
    runner's logprobs by request id. Columns, not an object per request: building one per request
    per step was half of ``update``'s time at a thousand running requests. As a sequence it yields
    ``EngineCoreOutput``s, built on access (for callers off the hot path)."""

    __slots__ = ("finish_reasons", "logprobs", "request_ids", "token_ids", "top_logprobs")

    def __init__(self, request_ids: list[str], token_ids: list[int], finish_reasons: dict[str, str],
                 logprobs: dict[str, float], top_logprobs: dict[str, list[tuple[int, float]]]) -> None:
        self.request_ids, self.token_ids, self.finish_reasons = request_ids, token_ids, finish_reasons
        self.logprobs, self.top_logprobs = logprobs, top_logprobs

    def __len__(self) -> int:
        return len(self.request_ids)

    @overload
    def __getitem__(self, i: int) -> EngineCoreOutput: ...
    @overload
    def __getitem__(self, i: slice) -> list[EngineCoreOutput]: ...
    def __getitem__(self, i: int | slice) -> EngineCoreOutput | list[EngineCoreOutput]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.request_ids)))]
        rid = self.request_ids[i]
        lp, top = logprobs_of(rid, self.logprobs, self.top_logprobs)
        return EngineCoreOutput(rid, [self.token_ids[i]], self.finish_reasons.get(rid), lp, top)

    def __iter__(self) -> Iterator[EngineCoreOutput]:
        return (self[i] for i in range(len(self.request_ids)))


NO_LOGPROBS: tuple[tuple, tuple] = ((), ())  # (new_logprobs, new_top_logprobs) of a request without them


def logprobs_of(request_id: str, logprobs: dict[str, float],
                top_logprobs: dict[str, list[tuple[int, float]]]) -> tuple[Sequence[float], Sequence]:
    """This request's ``(new_logprobs, new_top_logprobs)`` from a runner's output (empty if absent)."""
    lp = logprobs.get(request_id)
    top = top_logprobs.get(request_id)
    return ([lp] if lp is not None else ()), ([top] if top is not None else ())
