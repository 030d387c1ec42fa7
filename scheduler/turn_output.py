"""A finished turn's output as a job's listeners read it: its text and the tool calls the API returned.

The scheduler holds token ids only. Whoever makes a ``Request`` (the engine) may give it a
``TurnReader``: what the engine knows of the output beyond its ids (the tokenizer that decodes it,
the server's parser of its tool calls), carried on the request itself, so the job table's turn-end
event carries everything a listener needs (vLLM V1 carries a request's needs on its
``EngineCoreRequest`` the same way), and nothing is looked up by request id elsewhere.

Invariants: a reader is called only on a finished turn's output ids, at most once per listener that
asks (the estimator asks only when the turn carries no ``tool_name`` hint); it never raises (a
reader whose parser fails returns the text without calls); a request without a reader reads as
``NO_OUTPUT`` (no text, no calls).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["NO_OUTPUT", "ToolCalls", "ToolReader", "TurnOutput", "TurnReader"]

ToolCalls = list[dict[str, object]]  # OpenAI-style tool_calls, as the API returned them
ToolReader = Callable[[str], ToolCalls]  # a decoded output -> its tool calls (the server's parser)


@dataclass(frozen=True)
class TurnOutput:
    """A finished turn's decoded text (None: unknown) and its tool calls as the API read them (None:
    the output was not read for calls)."""

    text: str | None = None
    tool_calls: ToolCalls | None = None


NO_OUTPUT = TurnOutput()


class TurnReader(Protocol):
    """A finished turn's output ids -> its ``TurnOutput`` (given with the request by its maker)."""

    def __call__(self, output_token_ids: Sequence[int]) -> TurnOutput: ...
