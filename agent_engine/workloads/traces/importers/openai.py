"""OpenAI-style message logs: one JSON line per chat-completion call.

Keys read (anything else is ignored):
- the prompt: ``request.messages`` (nested form) or ``messages`` (flat form); ``request.tools`` /
  ``tools`` count toward an estimated prompt only;
- the answer: ``response.choices[0].message`` (``content``, ``tool_calls``, ``function_call``), or
  ``choices[0].text``; in the flat form ``response`` may also be the message itself or its text, and
  a line with top-level ``choices`` is its own response;
- usage: ``response.usage`` or ``usage``: ``prompt_tokens``, ``completion_tokens``,
  ``prompt_tokens_details.cached_tokens``; a missing (or zero) prompt or completion count is estimated;
- times, job id and model: see ``calls`` (``read_times``, ``group_id``).

Invariants: ``matches`` never raises; ``parse`` returns a ``Call`` or raises ``LineError`` with the
reason the line is dropped.
"""

from __future__ import annotations

import json
from typing import Any

import agent_engine.workloads.traces.importers.calls as call_parts
from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.importers.calls import Call
from agent_engine.workloads.traces.importers.report import LineError, Place

__all__ = ["SHAPE", "matches", "parse"]

SHAPE = "openai"


def _split(obj: JsonObject) -> tuple[JsonObject, Any]:
    return call_parts.split_call(obj, "choices")


def matches(obj: JsonObject) -> bool:
    """Whether a line looks like an OpenAI-style call (messages plus choices, a message or OpenAI usage)."""
    request, response = _split(obj)
    if not isinstance(request.get("messages"), list):
        return False
    usage = call_parts.usage_of(obj, response)
    return (isinstance(response, dict) and (isinstance(response.get("choices"), list) or "role" in response)) \
        or isinstance(response, str) or "prompt_tokens" in usage or "completion_tokens" in usage


def _answer(response: Any) -> JsonObject:
    if isinstance(response, str):
        return {"role": "assistant", "content": response}
    if not isinstance(response, dict):
        raise LineError("no response")
    choices = response.get("choices")
    if isinstance(choices, list):
        if not choices or not isinstance(choices[0], dict):
            raise LineError("response has no choices")
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return msg
        if isinstance(choices[0].get("text"), str):
            return {"role": "assistant", "content": choices[0]["text"]}
        raise LineError("response.choices[0] has neither message nor text")
    if "role" in response or "content" in response:
        return response
    raise LineError("response has no choices")


def _text(msg: JsonObject) -> str | None:
    content = msg.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else None


def parse(place: Place, obj: JsonObject) -> Call:
    """One line as a ``Call`` (raises ``LineError``)."""
    request, response = _split(obj)
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise LineError("no request messages")
    answer = _answer(response)
    calls = answer.get("tool_calls") or ([answer["function_call"]] if answer.get("function_call") else None)
    usage = call_parts.usage_of(obj, response)
    prompt = call_parts.first_int(usage, "prompt_tokens") or None
    output = call_parts.first_int(usage, "completion_tokens")
    cached = call_parts.first_int(usage.get("prompt_tokens_details"), "cached_tokens")
    tools = request.get("tools")
    parts = {
        "request": request, "response": response if isinstance(response, dict) else None,
        "messages": messages, "answer": answer, "tool_name": call_parts.tool_name_of(_text(answer), calls),
        "extra_chars": len(json.dumps(tools)) if tools else 0,
    }
    return call_parts.make_call(place, obj, parts, (prompt, output, cached), SHAPE)
