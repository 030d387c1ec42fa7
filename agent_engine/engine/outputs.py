"""What the engine returns per request (vLLM's shapes: ``RequestOutput.outputs[0].text`` ...)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    """Cumulative output of one sequence."""

    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None = None
    logprobs: list[float] | None = None
    top_logprobs: list[list[tuple[int, float]]] | None = None


@dataclass
class RequestMetrics:
    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None


@dataclass
class RequestOutput:
    """One request's state after a step: cumulative ``outputs`` plus this step's delta.

    ``new_token_ids`` / ``new_text`` hold only what this step added (for streaming).
    ``num_cached_tokens`` is the prefix-cache hit of the request's first admission.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    new_token_ids: list[int] = field(default_factory=list)
    new_text: str = ""
    metrics: RequestMetrics | None = None
    job_id: str | None = None
    # Where the job came from (``server.hints`` source names, "inferred" or "none"), whether this
    # turn found its job's pin on admission, and whether its blocks were pinned when it finished.
    hint_source: str = "none"
    tenant: str | None = None  # whose request (the server's API-key tenant; None: the default one)
    pin_hit: bool = False
    pinned: bool = False
