"""Anthropic Messages <-> the OpenAI-style chat form the chat path renders and parses.

Inbound (``to_chat_form``): ``system`` becomes a system message; a user message's ``tool_result`` blocks
become ``tool`` messages (in block order, text between them a user message); an assistant message's
``tool_use`` blocks become ``tool_calls``; tools and ``tool_choice`` take their OpenAI forms
(any -> "required", tool -> named, none -> "none"). A last assistant message with text only is a
prefill: the reply continues it.

Outbound (``reply_blocks``, ``stop_reason``): parsed text and tool calls become ``text`` and ``tool_use``
blocks; the engine's finish reason becomes Anthropic's ``stop_reason``.

Invariants:
- Ids map ``toolu_X`` <-> ``call_X`` and leave any other id unchanged, so the mapping is stable both
  ways: the ``toolu_`` id a reply gave comes back in a ``tool_result`` and reaches the template as the
  ``call_`` id the parser produced.
- Every ``tool_result`` answers a ``tool_use`` of the message right before it (else ValueError, as in
  Anthropic's API); text blocks of one message are joined with a newline.
- Nothing is lost on the way out, and a call stays a call: a call whose arguments are not a JSON
  object (a forced call the model did not write as one) is a ``tool_use`` with empty ``input``, its
  raw arguments kept as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from agent_engine.json_types import JsonObject, JsonValue
from agent_engine.server.anthropic.schema import (
    CountTokensRequest,
    InputMessage,
    TextBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from agent_engine.server.request_limits import loads_bounded

ANTHROPIC_ID_PREFIX = "toolu_"
OPENAI_ID_PREFIX = "call_"
TOOL_ERROR_PREFIX = "Error: "


class ToolCallLike(Protocol):
    id: str
    name: str
    arguments: str


@dataclass
class ChatForm:
    """A request in the chat path's terms: OpenAI messages, tools and tool_choice, plus a prefill."""

    messages: list[JsonObject]
    tools: list[JsonObject] | None
    tool_choice: str | JsonObject | None
    prefill: str = ""
    parallel: bool = True  # more than one tool call per reply (``disable_parallel_tool_use`` unset)


def to_openai_id(tool_use_id: str) -> str:
    if tool_use_id.startswith(ANTHROPIC_ID_PREFIX):
        return OPENAI_ID_PREFIX + tool_use_id[len(ANTHROPIC_ID_PREFIX):]
    return tool_use_id


def to_anthropic_id(call_id: str) -> str:
    if call_id.startswith(OPENAI_ID_PREFIX):
        return ANTHROPIC_ID_PREFIX + call_id[len(OPENAI_ID_PREFIX):]
    return call_id


def to_chat_form(req: CountTokensRequest) -> ChatForm:
    """The request as the chat path sees it. Raises ValueError for a conversation it cannot take."""
    messages: list[JsonObject] = []
    system = _join_text(req.system)
    if system:
        messages.append({"role": "system", "content": system})
    previous_tool_ids: set[str] = set()
    last = len(req.messages) - 1
    prefill = ""
    for i, msg in enumerate(req.messages):
        if msg.role == "user":
            _check_results(i, msg, previous_tool_ids)
            messages.extend(_user_messages(i, msg))
            previous_tool_ids = set()
        elif i == last and not any(isinstance(b, ToolUseBlock) for b in msg.content):
            prefill = _join_text([b for b in msg.content if isinstance(b, TextBlock)])
        else:
            messages.append(_assistant_message(msg))
            previous_tool_ids = {b.id for b in msg.content if isinstance(b, ToolUseBlock)}
    choice = tool_choice_to_openai(req.tool_choice)
    if prefill and (choice == "required" or isinstance(choice, dict)):
        raise ValueError('an assistant prefill cannot be combined with tool_choice "any" or "tool"')
    parallel = req.tool_choice is None or not req.tool_choice.disable_parallel_tool_use
    return ChatForm(messages, tools_to_openai(req), choice, prefill, parallel)


def tools_to_openai(req: CountTokensRequest) -> list[JsonObject] | None:
    """The tools as OpenAI function tools; a tool's ``strict`` travels with it when given."""
    if not req.tools:
        return None
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema,
                                              **({} if t.strict is None else {"strict": t.strict})}}
            for t in req.tools]


def tool_choice_to_openai(choice: ToolChoice | None) -> str | JsonObject | None:
    if choice is None:
        return None
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def _join_text(blocks: list[JsonValue]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def _check_results(index: int, msg: InputMessage, previous_tool_ids: set[str]) -> None:
    for j, block in enumerate(msg.content):
        if isinstance(block, ToolResultBlock) and block.tool_use_id not in previous_tool_ids:
            raise ValueError(
                f"messages.{index}.content.{j}: tool_result for tool_use_id {block.tool_use_id!r} has no "
                "matching tool_use block in the previous (assistant) message")


def _user_messages(index: int, msg: InputMessage) -> list[JsonObject]:
    """Tool results as ``tool`` messages, the text between them as user messages, in block order."""
    out: list[JsonObject] = []
    texts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if texts:
                out.append({"role": "user", "content": "\n".join(texts)})
                texts = []
            out.append(_tool_message(block))
        elif isinstance(block, ToolUseBlock):
            raise ValueError(f"messages.{index}: tool_use blocks belong in assistant messages")
    if texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    if not out:
        raise ValueError(f"messages.{index}: a user message needs text or tool_result content")
    return out


def _tool_message(block: ToolResultBlock) -> JsonObject:
    text = _join_text(block.content)
    if block.is_error:
        text = TOOL_ERROR_PREFIX + text
    return {"role": "tool", "tool_call_id": to_openai_id(block.tool_use_id), "content": text}


def _assistant_message(msg: InputMessage) -> JsonObject:
    calls = [{"id": to_openai_id(b.id), "type": "function",
              "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)}}
             for b in msg.content if isinstance(b, ToolUseBlock)]
    text = _join_text(msg.content)
    if any(isinstance(b, ToolResultBlock) for b in msg.content):
        raise ValueError("tool_result blocks belong in user messages")
    out: JsonObject = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        out["tool_calls"] = calls
    return out


def reply_blocks(content: str | None, tool_calls: list[ToolCallLike]) -> list[JsonObject]:
    """The response ``content``: the text (if any) first, then one ``tool_use`` block per call."""
    text = content or ""
    uses = []
    for call in tool_calls:
        args = json_object(call.arguments)
        if args is None:  # never lose what the model wrote
            text += call.arguments
        uses.append(tool_use_block(call, args or {}))
    return ([{"type": "text", "text": text}] if text else []) + uses


def tool_use_block(call: ToolCallLike, args: JsonObject) -> JsonObject:
    return {"type": "tool_use", "id": to_anthropic_id(call.id), "name": call.name, "input": args}


def json_object(text: str) -> JsonObject | None:
    """The JSON object ``text`` holds; None if it holds anything else or is not JSON."""
    try:
        value = loads_bounded(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def split_stop(text: str, finish_reason: str | None, stops: list[str] | None) -> tuple[str, str | None]:
    """``(text without the stop sequence that ended it, that sequence)``; the engine keeps the matched
    stop string at the end of a "stop"-finished text (``include_stop_str_in_output``)."""
    if finish_reason != "stop" or not stops:
        return text, None
    matched = max((s for s in stops if text.endswith(s)), key=len, default=None)
    return (text[: len(text) - len(matched)], matched) if matched else (text, None)


def stop_reason(finish_reason: str | None, stop_sequence: str | None, has_tool_use: bool) -> str:
    """Anthropic's ``stop_reason`` for an engine finish reason."""
    if finish_reason == "length":
        return "max_tokens"  # even after a whole call: the reply was cut short
    if has_tool_use:
        return "tool_use"
    return "stop_sequence" if stop_sequence is not None else "end_turn"


def usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, int]:
    """Anthropic usage: ``input_tokens`` excludes the prefix-cache hit, reported as a cache read."""
    return {"input_tokens": prompt_tokens - cached_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cached_tokens, "cache_creation_input_tokens": 0}
