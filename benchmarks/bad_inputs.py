"""A catalogue of hostile or careless requests: each must get a 4xx with the API's error body.

``BAD_INPUTS`` maps a name to the request (path, raw body, headers); ``send_bad_input`` sends one and
classifies the answer as ``"4xx"`` (good: a client error with a JSON error body), ``"4xx_no_body"``,
``"2xx"``, ``"5xx"`` or ``"no_answer"``. The fault benchmark interleaves them with real load; the
tests send each to a real server. ``top_k_overflow`` is the poisoned request: before the edge bounded
``top_k`` it overflowed the sampler and failed every request of its batch.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["BAD_INPUTS", "send_bad_input"]

_CHAT = "/v1/chat/completions"
_CMPL = "/v1/completions"


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


BAD_INPUTS: dict[str, tuple[str, bytes, dict[str, str]]] = {
    "top_k_overflow": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "top_k": 2**63}), {}),
    "temperature_nan": (_CMPL, b'{"prompt": "x", "max_tokens": 2, "temperature": NaN}', {}),
    "temperature_inf": (_CMPL, b'{"prompt": "x", "max_tokens": 2, "temperature": Infinity}', {}),
    "top_p_negative": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "top_p": -0.5}), {}),
    "max_tokens_negative": (_CMPL, _json({"prompt": "x", "max_tokens": -3}), {}),
    "lone_surrogate": (_CMPL, b'{"prompt": "abc \\ud800 def", "max_tokens": 2}', {}),
    "stream_as_string": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "stream": "yes"}), {}),
    "malformed_json": (_CMPL, b'{"prompt": "x", "max_tokens": ', {}),
    "wrong_types": (_CHAT, _json({"messages": "hello", "max_tokens": 2}), {}),
    "unknown_model": (_CMPL, _json({"prompt": "x", "model": "no-such-model"}), {}),
    "job_id_too_long": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "job_id": "j" * 100_000}), {}),
    "huge_body": (_CMPL, _json({"prompt": "word " * 8_000_000, "max_tokens": 2}), {}),  # 40 MB
    "empty_messages": (_CHAT, _json({"messages": [], "max_tokens": 2}), {}),
    "bad_token_id": (_CMPL, _json({"prompt": [1, 2, 10**12], "max_tokens": 2}), {}),
    "anthropic_no_max_tokens": ("/v1/messages", _json({"messages": [{"role": "user", "content": "x"}]}), {}),
    "prompt_list_20k": (_CMPL, _json({"prompt": ["x"] * 20_000, "max_tokens": 2}), {}),
    "message_extra_900_deep": (_CHAT, b'{"max_tokens": 2, "messages": [{"role": "user", "content": "x", "e": '
                               + b'{"a": ' * 900 + b"1" + b"}" * 901 + b"]}", {}),
    "tool_name_1mb": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "job_id": "j", "tool_name": "t" * 1_000_000}), {}),
    "best_of": (_CMPL, _json({"prompt": "x", "max_tokens": 2, "best_of": 3}), {}),
    "anthropic_mcp_servers": ("/v1/messages", _json({"max_tokens": 2, "messages": [{"role": "user", "content": "x"}],
                                                     "model": "any", "mcp_servers": [{"url": "http://x"}]}), {}),
    "text_plain_body": (_CMPL, _json({"prompt": "x", "max_tokens": 2}), {"content-type": "text/plain"}),
}


async def send_bad_input(client: httpx.AsyncClient, name: str) -> str:
    """Send ``BAD_INPUTS[name]``; classify the answer (see the module docstring)."""
    path, body, headers = BAD_INPUTS[name]
    try:
        r = await client.post(path, content=body, headers={"content-type": "application/json", **headers},
                              timeout=httpx.Timeout(60))
    except httpx.HTTPError:
        return "no_answer"
    if r.status_code >= 500:
        return "5xx"
    if r.status_code < 400:
        return "2xx"
    try:
        ok = "error" in r.json()
    except ValueError:
        ok = False
    return "4xx" if ok else "4xx_no_body"
