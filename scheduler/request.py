"""The scheduler-owned request: token ids, progress, status, block hashes and the agent fields."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduler.block_hash import hash_block_tokens
from scheduler.job_hints import INFERRED, NO_HINTS, JobHints
from scheduler.sampling_params import SamplingParams
from scheduler.turn_output import NO_OUTPUT, TurnOutput, TurnReader

if TYPE_CHECKING:
    from scheduler.step_io import ScheduledRequest


class RequestStatus(enum.IntEnum):
    WAITING = 0
    RUNNING = 1
    PREEMPTED = 2
    # Everything from here on is finished.
    FINISHED_STOPPED = 3
    FINISHED_LENGTH_CAPPED = 4
    FINISHED_ABORTED = 5

    @property
    def finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED

    def finish_reason(self) -> str | None:
        return _FINISH_REASONS.get(self)


_FINISH_REASONS = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH_CAPPED: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
}


class Request:
    """One generation request as the scheduler sees it (token ids only, never text).

    Invariants: ``all_token_ids == prompt_token_ids + output_token_ids``;
    ``0 <= num_computed_tokens <= num_tokens``; ``block_hashes[i]`` is the chained hash of the
    i-th full block of ``all_token_ids`` (the salt enters the first block's extra keys), and
    ``len(block_hashes) == num_tokens // block_size`` at all times.
    """

    # Slots: the scheduler's per-step loops read these attributes for every running request.
    __slots__ = (
        "all_token_ids", "arrival_time", "block_hashes", "block_size", "eos_token_id", "finished_time",
        "first_scheduled_time", "first_token_time", "hints", "job_arrival_time", "length_limit",
        "num_cached_tokens", "num_computed_tokens", "num_preemptions", "output_reader", "output_token_ids",
        "pin_hit", "pinned", "prompt_token_ids", "request_id", "sampling_params", "scheduled_view", "status",
        "stop_candidates", "strong_joins",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        sampling_params: SamplingParams,
        *,
        block_size: int,
        arrival_time: float,
        eos_token_id: int | None = None,
        hints: JobHints = NO_HINTS,
        job_arrival_time: float | None = None,
        output_reader: TurnReader | None = None,
    ) -> None:
        if not prompt_token_ids:
            raise ValueError("prompt must contain at least one token")
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.sampling_params = sampling_params
        self.block_size = block_size
        self.arrival_time = arrival_time
        self.eos_token_id = eos_token_id
        self.hints = hints  # whole, as the client (or the engine's job inference) gave them
        self.strong_joins = 0  # an inferred job's strong joins so far, carried while this turn runs
        # The program-order key: the job's first arrival as of this turn's arrival (the policy stamps it
        # from the job's record when the job table publishes the arrival); the turn's own until then.
        self.job_arrival_time = arrival_time if job_arrival_time is None else job_arrival_time
        self.output_reader = output_reader  # how its output reads as text and tool calls (its maker's)
        self._init_stop_rules()
        self._init_progress()

    def _init_stop_rules(self) -> None:
        """The tokens after which ``stop_status`` must look (EOS and the stop tokens), and the token
        count at which a length limit may end the request (the scheduler lowers it to max_model_len)."""
        sp, eos = self.sampling_params, self.eos_token_id
        self.stop_candidates = frozenset(sp.stop_token_ids) | ({eos} if eos is not None else set())
        self.length_limit = len(self.prompt_token_ids) + sp.max_tokens

    def _init_progress(self) -> None:
        """The state the scheduler advances: tokens, progress, status, block hashes, timestamps."""
        self.output_token_ids: list[int] = []
        self.all_token_ids: list[int] = list(self.prompt_token_ids)
        self.num_computed_tokens = 0
        self.status = RequestStatus.WAITING
        self.block_hashes: list[int] = []
        # Prefix-cache hit (tokens) at the request's first admission; -1 until admitted.
        self.num_cached_tokens = -1
        self.num_preemptions = 0
        # True once this turn was admitted while its job still held a pin (the pin was hit).
        self.pin_hit = False
        # True when this turn's blocks were pinned for its job as it finished.
        self.pinned = False
        # This request's chunk in the step being run (a ScheduledRequest the scheduler refreshes in
        # place each step; a new one at each admission). None until first admitted.
        self.scheduled_view: ScheduledRequest | None = None
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.finished_time: float | None = None
        self._extend_block_hashes()

    # ---- the hints, as the policy and the estimator read them ------------------------------------
    @property
    def job_id(self) -> str | None:
        return self.hints.job_id

    @property
    def priority(self) -> int:
        return self.hints.priority

    @property
    def cache_salt(self) -> str | None:
        return self.hints.cache_salt

    @property
    def is_last_step(self) -> bool:
        return self.hints.is_last_step

    @property
    def tenant(self) -> str | None:
        """Whose pin budget and estimator this request's job uses (None: the default tenant)."""
        return self.hints.tenant

    @property
    def tool_name(self) -> str | None:
        return self.hints.tool_name

    @property
    def tool_ttl_hint(self) -> float | None:
        return self.hints.tool_ttl_hint

    @property
    def job_inferred(self) -> bool:
        """The job was inferred from the prefix chain, not declared: its pins are cheap (wholly soft)
        until it is confirmed (``job_confirmed``)."""
        return self.hints.hint_source == INFERRED

    @property
    def job_confirmed(self) -> bool:
        """An inferred job the prefix chain has vouched for often enough to pin like a declared one."""
        return self.hints.confirmed

    def join_inferred_job(self, job_id: str, confirmed: bool = False, strong_joins: int = 0) -> None:
        """Give this request (which came without a job) the job the engine inferred for it, with the
        job's strong joins so far (``scheduler.job_index``: the turn carries them back to the index)."""
        if self.hints.job_id is not None:
            raise ValueError(f"request {self.request_id!r} already belongs to job {self.hints.job_id!r}")
        self.hints = self.hints.inferred(job_id, confirmed)
        self.strong_joins = strong_joins

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status.finished

    def stop_status(self, token_id: int, max_model_len: int) -> RequestStatus | None:
        """The finished status the sampled ``token_id`` (already appended) puts this request in, if any."""
        sp = self.sampling_params
        n_out = len(self.output_token_ids)
        if n_out >= sp.min_tokens:
            if token_id == self.eos_token_id and not sp.ignore_eos:
                return RequestStatus.FINISHED_STOPPED
            if sp.stop_token_ids and token_id in sp.stop_token_ids:
                return RequestStatus.FINISHED_STOPPED
        if n_out >= sp.max_tokens or len(self.all_token_ids) >= max_model_len:
            return RequestStatus.FINISHED_LENGTH_CAPPED
        return None

    def read_output(self) -> TurnOutput:
        """The output as text and tool calls, by the reader its maker gave (``NO_OUTPUT`` without one)."""
        return NO_OUTPUT if self.output_reader is None else self.output_reader(self.output_token_ids)

    # ---- block hashes (the scheduler's ``update`` appends sampled tokens and calls this per full block) --
    def _extend_block_hashes(self) -> None:
        bs = self.block_size
        n_full = len(self.all_token_ids) // bs
        parent = self.block_hashes[-1] if self.block_hashes else None
        for i in range(len(self.block_hashes), n_full):
            extra = (self.cache_salt,) if (i == 0 and self.cache_salt) else None
            parent = hash_block_tokens(parent, self.all_token_ids[i * bs : (i + 1) * bs], extra)
            self.block_hashes.append(parent)

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, status={self.status.name}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, job={self.job_id!r})"
        )
