"""Sampling parameters of one request (frozen; validated at construction)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.structured import StructuredSpec

# Temperatures below this are greedy (as in vLLM): dividing logits by less overflows float32.
MIN_TEMPERATURE = 1e-5
# No vocabulary is larger; the server also bounds top_k by the served model's vocabulary.
MAX_TOP_K = 1 << 24


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request's output.

    Invariants (checked in ``__post_init__``, violations raise ``ValueError``):
    temperature >= 0 (0 means greedy; one below ``MIN_TEMPERATURE`` is stored as 0), 0 < top_p <= 1, top_k == 0 (off) or >= 1,
    max_tokens >= 1, 0 <= min_tokens <= max_tokens, logprobs is None or 0..20.
    ``structured`` (a ``StructuredSpec`` or None) constrains the output to a JSON schema, regex, choice
    or grammar; the engine enforces it, the scheduler never looks inside.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    min_tokens: int = 0
    stop: tuple[str, ...] = field(default_factory=tuple)
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    ignore_eos: bool = False
    seed: int | None = None
    logprobs: int | None = None
    include_stop_str_in_output: bool = False
    structured: StructuredSpec | None = None

    def __post_init__(self) -> None:
        # Accept lists/strings from callers, store tuples so the object stays hashable and frozen.
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop or ()))
        if not isinstance(self.stop_token_ids, tuple):
            object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids or ()))
        if not isinstance(self.temperature, (int, float)) or not 0 <= self.temperature < math.inf:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if self.temperature < MIN_TEMPERATURE:
            object.__setattr__(self, "temperature", 0.0)
        if not isinstance(self.top_p, (int, float)) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k == -1:
            object.__setattr__(self, "top_k", 0 if self.top_k == -1 else self.top_k)
        if not isinstance(self.top_k, int) or not 0 <= self.top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be -1 or 0 (disabled) or a positive integer up to {MAX_TOP_K}, "
                             f"got {self.top_k!r}")
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not isinstance(self.min_tokens, int) or not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"min_tokens must be in [0, max_tokens], got {self.min_tokens!r}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError("stop must be a non-empty string or a list of non-empty strings")
        if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
            raise ValueError("stop_token_ids must be non-negative integers")
        if self.seed is not None and (not isinstance(self.seed, int) or not -(2**63) <= self.seed < 2**63):
            raise ValueError(f"seed must be a 64-bit integer, got {self.seed!r}")
        if self.logprobs is not None and (not isinstance(self.logprobs, int) or not 0 <= self.logprobs <= 20):
            raise ValueError(f"logprobs must be an integer in [0, 20], got {self.logprobs!r}")
        if self.structured is not None and not isinstance(self.structured, StructuredSpec):
            raise ValueError(f"structured must be a StructuredSpec or None, got {type(self.structured).__name__}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
