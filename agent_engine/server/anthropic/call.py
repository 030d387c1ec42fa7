"""``MessagesCall``: one ``/v1/messages`` call, what its full body and its stream share.

Invariants: one call per HTTP request, made before anything is submitted; every response object
starts with ``head`` (same ``msg_`` id and model); the model's text is read through ``parse`` (tool
calls parsed only when the request offered tools and did not say ``tool_choice: none``) after the
matched stop sequence was cut off (``split_stop``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.anthropic.convert import ChatForm, split_stop, usage
from agent_engine.server.anthropic.protocol import MessagesRequest
from agent_engine.server.tools import ToolParser


@dataclass
class MessagesCall:
    """One Messages API call (streamed or not)."""

    req: MessagesRequest
    form: ChatForm
    model: str
    parser: ToolParser | None = None  # None: the reply is plain text (no tools, or tool_choice none)
    id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")

    def head(self) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model}

    def visible_text(self, out: RequestOutput) -> tuple[str, str | None]:
        """The output's text without a matched stop sequence, and that sequence (None if none)."""
        comp = out.outputs[0]
        return split_stop(comp.text, comp.finish_reason, self.req.stop_sequences)

    def parse(self, text: str) -> tuple[str | None, list[Any]]:
        """``(content, tool calls)`` of a finished text."""
        if self.parser is None:
            return text, []
        parsed = self.parser.parse(text)
        return parsed.content, list(parsed.tool_calls)


def output_usage(out: RequestOutput) -> dict[str, int]:
    """Anthropic usage of one engine output so far."""
    return usage(len(out.prompt_token_ids), out.num_cached_tokens, len(out.outputs[0].token_ids))
