"""One OpenAI completions or chat call (``ApiCall``) and the pure formatting of its response bodies.

``ApiCall`` is the call's identity and the pieces every response of it shares. Invariants: one
``ApiCall`` per HTTP call, made after the engine accepted its requests; every response object (full
body or stream chunk) starts with ``head`` (same ``id``, ``created``, ``model``, and ``job_id`` when
the call carried one); logprobs token strings come from ``ServerState.fill_token_strs``; ``tools`` is
the chat call's tool-call parser, None when its output is plain text (no tools, or
``tool_choice: "none"``).

The formatting (``sse``, ``usage``, the logprobs objects) is pure: no engine access, no I/O; token
strings for logprobs come from a caller-supplied map (filled on the tokenizer thread). Invariant: a
stream is ``data: {json}\\n\\n`` events ending with ``data: [DONE]\\n\\n``; a failed request inside a
stream is one ``data: {"error": {...}}`` event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_engine.engine.outputs import RequestOutput
from agent_engine.json_types import JsonObject, JsonValue
from agent_engine.server.openai_schema import ChatCompletionRequest, CompletionRequest
from agent_engine.server.sse import event_json
from agent_engine.server.state import ServerState
from agent_engine.server.tools import ToolParser

DONE = "data: [DONE]\n\n"


def sse(obj: Mapping[str, JsonValue]) -> str:
    return f"data: {event_json(obj)}\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> JsonObject:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion_logprobs(token_ids: Sequence[int], logprobs: Sequence[float] | None,
                        top: Sequence[Sequence[tuple[int, float]]] | None, strs: Mapping[int, str],
                        offset: int = 0) -> JsonObject | None:
    """The legacy completions ``logprobs`` object for ``token_ids`` (text offsets start at ``offset``)."""
    if logprobs is None:
        return None
    tokens = [strs.get(t, "") for t in token_ids]
    offsets = []
    for tok in tokens:
        offsets.append(offset)
        offset += len(tok)
    top_out = None
    if top:
        top_out = [{strs.get(t, ""): lp for t, lp in alts} for alts in top]
    return {"tokens": tokens, "token_logprobs": list(logprobs), "top_logprobs": top_out,
            "text_offset": offsets}


def chat_logprobs(token_ids: Sequence[int], logprobs: Sequence[float] | None,
                  top: Sequence[Sequence[tuple[int, float]]] | None,
                  strs: Mapping[int, str]) -> JsonObject | None:
    """The chat ``logprobs`` object: ``{"content": [{token, logprob, bytes, top_logprobs}]}``."""
    if logprobs is None:
        return None
    content = []
    for i, (t, lp) in enumerate(zip(token_ids, logprobs, strict=False)):
        s = strs.get(t, "")
        alts = top[i] if top and i < len(top) else []
        content.append({
            "token": s, "logprob": lp, "bytes": list(s.encode("utf-8")),
            "top_logprobs": [{"token": strs.get(a, ""), "logprob": alp,
                              "bytes": list(strs.get(a, "").encode())} for a, alp in alts],
        })
    return {"content": content}


def logprob_slice(out: RequestOutput, start: int) -> tuple[list[int], list[float] | None,
                                                         list[list[tuple[int, float]]] | None]:
    """Token ids, logprobs and top-logprobs of ``out`` from token index ``start`` on."""
    comp = out.outputs[0]
    ids = list(comp.token_ids[start:])
    lps = None if comp.logprobs is None else list(comp.logprobs[start:])
    top = None if comp.top_logprobs is None else [list(x) for x in comp.top_logprobs[start:]]
    return ids, lps, top


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

    def head(self, obj: str) -> JsonObject:
        """The fields every response object of this call starts with."""
        d: JsonObject = {"id": self.id, "object": obj, "created": self.created,
                             "model": self.state.model_name}
        if self.job_id is not None:
            d["job_id"] = self.job_id
        return d

    def wants_logprobs(self) -> bool:
        return bool(self.req.logprobs) if self.chat else self.req.logprobs is not None

    async def logprobs(self, out: RequestOutput, start: int, text_offset: int = 0) -> JsonObject | None:
        """The logprobs object of ``out``'s tokens from index ``start`` on (None unless requested)."""
        if not self.wants_logprobs():
            return None
        ids, lps, top = logprob_slice(out, start)
        need = list(ids) + [t for alts in (top or []) for t, _ in alts]
        strs = await self.state.fill_token_strs(need)
        if self.chat:
            return chat_logprobs(ids, lps, top, strs)
        return completion_logprobs(ids, lps, top, strs, text_offset)
