"""Request models of tools in the OpenAI chat API: function tools and assistant messages' tool calls.

Invariants: only function tools and function calls are accepted (any other ``type`` is a validation
error naming it, -> 400); a function name is 1-64 characters of ``[a-zA-Z0-9_-]``; ``parameters`` is an
object; a call's ``arguments`` is JSON text (an object is accepted too).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, field_validator, model_validator

from agent_engine.server.request_limits import loads_bounded

_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class CalledFunction(BaseModel):
    """The function of an assistant message's tool call; ``arguments`` is JSON text (an object is
    accepted too)."""

    model_config = ConfigDict(extra="ignore")
    name: StrictStr
    arguments: StrictStr | dict[str, Any] = "{}"


class MessageToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: StrictStr
    type: StrictStr = "function"
    function: CalledFunction

    @field_validator("type")
    @classmethod
    def _function_only(cls, value: str) -> str:
        if value != "function":
            raise ValueError(f"tool call type {value!r} is not supported (only 'function')")
        return value


def arguments_value(fn: CalledFunction) -> Any:
    """The arguments as a mapping when they are a JSON object (what templates expect), else as given."""
    if isinstance(fn.arguments, dict):
        return fn.arguments
    try:
        value = loads_bounded(fn.arguments)
    except ValueError:
        return fn.arguments
    return value if isinstance(value, dict) else fn.arguments


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: StrictStr
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _TOOL_NAME.fullmatch(value):
            raise ValueError(f"function name {value!r} must be 1-64 characters of a-z, A-Z, 0-9, _ or -")
        return value


class ToolDef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: StrictStr
    function: FunctionDef | None = None

    @model_validator(mode="after")
    def _function_tool(self) -> ToolDef:
        if self.type != "function":
            raise ValueError(f"tool type {self.type!r} is not supported (only 'function')")
        if self.function is None:
            raise ValueError("a function tool needs a function")
        return self
