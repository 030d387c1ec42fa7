"""Tool-call formats ("families") written as JSON: how a model writes calls, and how we show them to it.

A family knows four things: where call blocks are in an output (``markers``), how to read one
(``parse_block``), how to write calls and tool results back into a conversation (``format_calls``,
``tool_result``) and how to describe the tools in a system message (``describe``), for chat
templates that know nothing of tools; plus the opening that forces a call (``forced_prefix``).

Invariants:
- ``parse_block`` never raises: a block it cannot read as calls is None (the caller keeps it as text).
- Round trip: ``parse_block(format_calls(calls))`` gives back the calls' names and arguments.
- Parsed arguments are re-serialized JSON objects (``json.dumps``), whatever spacing the model used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_engine.json_types import JsonObject
from agent_engine.server.request_limits import loads_bounded
from agent_engine.server.tools.splitter import Markers

Call = tuple[str, str]  # (name, arguments as JSON text)
_DECODER = json.JSONDecoder()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def args_value(arguments: Any) -> Any:
    """Arguments as a JSON value to write back: a JSON-object text becomes the object."""
    if isinstance(arguments, str):
        try:
            value = loads_bounded(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments if arguments is not None else {}


def call_of(obj: Any, arg_keys: tuple[str, ...] = ("arguments", "parameters")) -> Call | None:
    """``{"name": str, "arguments": {...}}`` (or one of ``arg_keys``) as a call; None if it is not one."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    args = next((obj[k] for k in arg_keys if k in obj), {})
    if isinstance(args, str):
        try:
            args = loads_bounded(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return name.strip(), dumps(args)


def calls_of(value: Any) -> list[Call] | None:
    """A call object or a non-empty list of them; None if anything in it is not a call."""
    items = value if isinstance(value, list) else [value]
    calls = [call_of(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return calls  # type: ignore[return-value]


def loads(text: str) -> Any:
    try:
        return loads_bounded(text)
    except ValueError:
        return None


class Family:
    """The base of a tool-call format; subclasses set the class attributes and override as needed."""

    name = ""
    markers = Markers()
    call_example = ""  # how one call looks, for the description
    closers = ""  # what may follow a forced call's arguments (closing brackets)
    trigger = ""  # the text every call opens with (a prefix of ``call_begin``); "" : no call grammar
    call_end = ""  # the text that closes a call after its arguments

    def call_begin(self, name: str) -> str | None:
        """The text of a call of ``name`` up to its arguments, for the call grammar (``call_begin`` +
        arguments + ``call_end`` is one whole call); None when the family's calls are not JSON."""
        return None

    def parse_block(self, block: str) -> list[Call] | None:
        raise NotImplementedError

    def forced_prefix(self, name: str | None) -> str:
        """The opening of a call (of function ``name``, or any when None) that the prompt ends with."""
        raise NotImplementedError

    def format_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        raise NotImplementedError

    def tool_result(self, content: str) -> str:
        return f"<tool_response>\n{content}\n</tool_response>"

    def describe(self, tools: Sequence[JsonObject]) -> str:
        """A system-message section listing the tools and how to call them."""
        listing = "\n".join(dumps(t) for t in tools)
        return ("# Tools\n\nYou may call one or more functions to help with the request. "
                f"The functions, as JSON signatures:\n<tools>\n{listing}\n</tools>\n\n"
                f"To call a function, reply with:\n{self.call_example}")


class Hermes(Family):
    """``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, one block per call (Qwen, Hermes)."""

    name = "hermes"
    markers = Markers(anywhere=("<tool_call>",), end="</tool_call>")
    call_example = '<tool_call>\n{"name": <function-name>, "arguments": <arguments-json-object>}\n</tool_call>'
    closers = "}"
    trigger = "<tool_call>"
    call_end = "}\n</tool_call>"

    def call_begin(self, name: str) -> str | None:
        return f'<tool_call>\n{{"name": {dumps(name)}, "arguments": '

    def parse_block(self, block: str) -> list[Call] | None:
        inner = block[len("<tool_call>"):]
        if inner.endswith("</tool_call>"):
            inner = inner[: -len("</tool_call>")]
        return calls_of(loads(inner.strip()))

    def forced_prefix(self, name: str | None) -> str:
        return "<tool_call>\n" if name is None else self.call_begin(name) or ""

    def format_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "\n".join(f"<tool_call>\n{dumps({'name': n, 'arguments': args_value(a)})}\n</tool_call>"
                         for n, a in calls)


class Llama3Json(Family):
    """``{"name": ..., "parameters": {...}}`` as the whole output, calls separated by ``;`` (Llama 3.x)."""

    name = "llama3_json"
    markers = Markers(at_start=("{", "<|python_tag|>"))
    call_example = '{"name": <function-name>, "parameters": <arguments-json-object>}'
    closers = "}"
    trigger = '{"name": '
    call_end = "}"

    def call_begin(self, name: str) -> str | None:
        return f'{{"name": {dumps(name)}, "parameters": '

    def parse_block(self, block: str) -> list[Call] | None:
        text = block.strip()
        if text.startswith("<|python_tag|>"):
            text = text[len("<|python_tag|>"):]
        calls: list[Call] = []
        pos = 0
        while True:
            while pos < len(text) and (text[pos].isspace() or text[pos] == ";"):
                pos += 1
            if pos == len(text):
                return calls or None
            try:
                obj, pos = _DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                return None
            call = call_of(obj, ("parameters", "arguments"))
            if call is None:
                return None
            calls.append(call)

    def forced_prefix(self, name: str | None) -> str:
        return '{"name": "' if name is None else self.call_begin(name) or ""

    def format_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "; ".join(dumps({"name": n, "parameters": args_value(a)}) for n, a in calls)


class Mistral(Family):
    """``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` at the end of the output (Mistral).

    The marker is a special token that detokenizers may drop, so a bare JSON list of calls as the
    whole output counts too."""

    name = "mistral"
    markers = Markers(anywhere=("[TOOL_CALLS]",), at_start=("[",))
    call_example = '[TOOL_CALLS][{"name": <function-name>, "arguments": <arguments-json-object>}]'
    closers = "}]"
    trigger = "[TOOL_CALLS]"
    call_end = "}]"

    def call_begin(self, name: str) -> str | None:
        return f'[TOOL_CALLS][{{"name": {dumps(name)}, "arguments": '

    def parse_block(self, block: str) -> list[Call] | None:
        text = block.strip()
        if text.startswith("[TOOL_CALLS]"):
            text = text[len("[TOOL_CALLS]"):].strip()
        return calls_of(loads(text))

    def forced_prefix(self, name: str | None) -> str:
        return "[TOOL_CALLS]" if name is None else self.call_begin(name) or ""

    def format_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "[TOOL_CALLS]" + dumps([{"name": n, "arguments": args_value(a)} for n, a in calls])

    def tool_result(self, content: str) -> str:
        return f"[TOOL_RESULTS]{content}[/TOOL_RESULTS]"
