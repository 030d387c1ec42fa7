"""Response bodies of the OpenAI-compatible API: full responses, SSE chunks, usage and logprobs.

Pure formatting: no engine access, no I/O. Token strings for logprobs come from a caller-supplied map
(filled on the engine thread). Invariant: a stream is ``data: {json}\\n\\n`` events ending with
``data: [DONE]\\n\\n``; a failed request inside a stream is one ``data: {"error": {...}}`` event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_engine.engine.outputs import RequestOutput

DONE = "data: [DONE]\n\n"


def sse(obj: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion_logprobs(token_ids: Sequence[int], logprobs: Sequence[float] | None,
                        top: Sequence[Sequence[tuple[int, float]]] | None, strs: Mapping[int, str],
                        offset: int = 0) -> dict[str, Any] | None:
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
                  strs: Mapping[int, str]) -> dict[str, Any] | None:
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
