"""Anthropic-style message logs: one JSON line per Messages API call.

Keys read (anything else is ignored):
- the prompt: ``request.system`` (a string or text blocks) and ``request.messages`` (nested form), or
  ``system`` and ``messages`` (flat form); ``tools`` count toward an estimated prompt only;
- the answer: ``response.content`` blocks (flat form: a top-level ``content`` list when there is no
  ``response``): ``text`` blocks are the text, the first ``tool_use`` block (``name``, ``input``) is
  the tool call;
- usage: ``response.usage`` or ``usage``. Anthropic's ``input_tokens`` excludes the cache, so the
  prompt is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` and the cached
  tokens are ``cache_read_input_tokens``; the output is ``output_tokens``; a missing count is estimated;
- times, job id and model: see ``calls`` (``read_times``, ``group_id``).

Invariants: ``matches`` never raises; ``parse`` returns a ``Call`` or raises ``LineError``.
"""

from __future__ import annotations

import json
from typing import Any

import agent_engine.workloads.traces.importers.calls as call_parts
from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.importers.calls import Call
from agent_engine.workloads.traces.importers.report import LineError, Place

__all__ = ["SHAPE", "matches", "parse"]

SHAPE = "anthropic"


def _split(obj: JsonObject) -> tuple[JsonObject, Any]:
    return call_parts.split_call(obj, "content")


def matches(obj: JsonObject) -> bool:
    """Whether a line looks like an Anthropic call: no OpenAI choices or usage, and one of a response of
    ``type: message``, a ``tool_use`` block, a ``system`` request field or Anthropic usage keys."""
    request, response = _split(obj)
    if not isinstance(request.get("messages"), list):
        return False
    usage = call_parts.usage_of(obj, response)
    response = response if isinstance(response, dict) else {}
    if "choices" in response or "prompt_tokens" in usage:
        return False
    blocks = response.get("content") if isinstance(response.get("content"), list) else []
    tool_use = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)
    return response.get("type") == "message" or tool_use or "system" in request \
        or "input_tokens" in usage or "output_tokens" in usage


def _tokens(usage: JsonObject) -> tuple[int | None, int | None, int | None]:
    fresh = call_parts.first_int(usage, "input_tokens")
    read = call_parts.first_int(usage, "cache_read_input_tokens")
    created = call_parts.first_int(usage, "cache_creation_input_tokens")
    prompt = None if fresh is None else (fresh + (read or 0) + (created or 0)) or None
    return prompt, call_parts.first_int(usage, "output_tokens"), read


def parse(place: Place, obj: JsonObject) -> Call:
    """One line as a ``Call`` (raises ``LineError``)."""
    request, response = _split(obj)
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise LineError("no request messages")
    if not isinstance(response, dict) or not isinstance(response.get("content"), list):
        raise LineError("response has no content blocks")
    blocks = [b for b in response["content"] if isinstance(b, dict)]
    text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    calls = [{"function": {"name": b.get("name"), "arguments": b.get("input")}}
             for b in blocks if b.get("type") == "tool_use"]
    system = request.get("system")
    prompt_msgs = ([{"role": "system", "content": system}] if system else []) + messages
    tools = request.get("tools")
    parts = {
        "request": request, "response": response, "messages": prompt_msgs,
        "answer": {"role": "assistant", "content": response["content"]},
        "tool_name": call_parts.tool_name_of(text, calls or None), "extra_chars": len(json.dumps(tools)) if tools else 0,
    }
    return call_parts.make_call(place, obj, parts, _tokens(call_parts.usage_of(obj, response)), SHAPE)
