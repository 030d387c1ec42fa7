"""``ApiCall``: the identity of one completions or chat call and the pieces every response of it shares.

Invariants: one ``ApiCall`` per HTTP call, made after the engine accepted its requests; every response
object (full body or stream chunk) starts with ``head`` (same ``id``, ``created``, ``model``, and
``job_id`` when the call carried one); logprobs token strings come from ``ServerState.fill_token_strs``;
``tools`` is the chat call's tool-call parser, None when its output is plain text (no tools, or
``tool_choice: "none"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.protocol import ChatCompletionRequest, CompletionRequest
from agent_engine.server.responses import chat_logprobs, completion_logprobs, logprob_slice
from agent_engine.server.state import ServerState
from agent_engine.server.tools import ToolParser


@dataclass
class ApiCall:
    """One API call (completions or chat; streamed or not)."""

    id: str
    state: ServerState
    req: CompletionRequest | ChatCompletionRequest
    job_id: str | None
    created: int
    chat: bool
    tools: ToolParser | None = None

    @property
    def object_name(self) -> str:
        """The ``object`` of a full response."""
        return "chat.completion" if self.chat else "text_completion"

    @property
    def chunk_object_name(self) -> str:
        """The ``object`` of a stream chunk."""
        return "chat.completion.chunk" if self.chat else "text_completion"

    def head(self, obj: str) -> dict[str, Any]:
        """The fields every response object of this call starts with."""
        d: dict[str, Any] = {"id": self.id, "object": obj, "created": self.created,
                             "model": self.state.model_name}
        if self.job_id is not None:
            d["job_id"] = self.job_id
        return d

    def wants_logprobs(self) -> bool:
        return bool(self.req.logprobs) if self.chat else self.req.logprobs is not None

    async def logprobs(self, out: RequestOutput, start: int, text_offset: int = 0) -> dict[str, Any] | None:
        """The logprobs object of ``out``'s tokens from index ``start`` on (None unless requested)."""
        if not self.wants_logprobs():
            return None
        ids, lps, top = logprob_slice(out, start)
        need = list(ids) + [t for alts in (top or []) for t, _ in alts]
        strs = await self.state.fill_token_strs(need)
        if self.chat:
            return chat_logprobs(ids, lps, top, strs)
        return completion_logprobs(ids, lps, top, strs, text_offset)
