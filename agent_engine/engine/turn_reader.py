"""``DecodedTurn``: how the engine reads a finished turn's output for its job's listeners.

The engine gives each scheduler ``Request`` it makes one of these (``Request.output_reader``): its
tokenizer, and the server's reader of the output's tool calls when the API reads the output for calls
(``EngineRequest.tool_reader``). The job table's turn-end event then carries the turn's text and
calls on the request itself; nothing is registered by request id, and nothing but the engine thread
that owns the request touches it.

Invariants: the text is the whole output decoded without special tokens (what the tool-call parser
reads); a tool reader that raises is logged and the turn reads as text without calls (a reader never
takes the engine down); without a tool reader the calls are None.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.turn_output import ToolReader, TurnOutput

__all__ = ["DecodedTurn", "TextDecoder"]

logger = logging.getLogger(__name__)


class TextDecoder(Protocol):
    """The tokenizer as a turn's reader uses it: token ids back to text."""

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True, slots=True)
class DecodedTurn:
    """A ``scheduler.turn_output.TurnReader``: the output decoded by ``tokenizer``, its calls read by
    ``tool_reader`` (None: not read for calls)."""

    tokenizer: TextDecoder
    tool_reader: ToolReader | None = None

    def __call__(self, output_token_ids: Sequence[int]) -> TurnOutput:
        text = self.tokenizer.decode(output_token_ids, skip_special_tokens=True)
        if self.tool_reader is None:
            return TurnOutput(text)
        try:
            return TurnOutput(text, self.tool_reader(text))
        except Exception:  # noqa: BLE001 - a reader must never take the engine down
            logger.exception("tool-call reader failed")
            return TurnOutput(text)
