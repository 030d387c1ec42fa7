"""``tool_choice``: what the request lets or makes the model do with its tools.

Invariants:
- ``parse_tool_choice`` accepts exactly OpenAI's forms ("none", "auto", "required",
  ``{"type": "function", "function": {"name": ...}}``) and raises ``ValueError`` (a 400) otherwise,
  including "required" or a named choice without tools and a name that is not among the tools.
- No ``tool_choice``: "auto" when tools are given, else "none" (OpenAI's default).
- "required" with a single tool is that tool by name: the only call the model may make.
- ``parses``: the output is read for tool calls (tools given and the choice is not "none").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_engine.json_types import JsonValue

ChoiceMode = Literal["none", "auto", "required", "named"]
_MODES = ("none", "auto", "required")


@dataclass(frozen=True)
class ToolChoice:
    """A validated ``tool_choice``; ``name`` is set exactly when ``mode`` is "named"."""

    mode: ChoiceMode
    name: str | None = None

    @property
    def parses(self) -> bool:
        """The model's output is read for tool calls."""
        return self.mode != "none"

    @property
    def forces(self) -> bool:
        """The output must be a tool call: the prompt ends with the opening of one."""
        return self.mode in ("required", "named")


NO_TOOLS = ToolChoice("none")


def tool_names(tools: Sequence[JsonValue] | None) -> list[str]:
    """The function names of OpenAI-format tools (dicts or objects with a ``function``)."""
    names = []
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else getattr(tool, "function", None)
        name = fn.get("name") if isinstance(fn, Mapping) else getattr(fn, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def parse_tool_choice(tool_choice: Any, tools: Sequence[JsonValue] | None) -> ToolChoice:
    """The ``ToolChoice`` of a request's ``tool_choice`` and ``tools``. Raises ValueError."""
    names = tool_names(tools)
    if tool_choice is None:
        return ToolChoice("auto") if names else NO_TOOLS
    if isinstance(tool_choice, str):
        return _mode_choice(tool_choice, names)
    if isinstance(tool_choice, Mapping):
        return _named_choice(tool_choice, names)
    raise ValueError(f"tool_choice must be a string or an object, not {type(tool_choice).__name__}")


def _mode_choice(mode: str, names: list[str]) -> ToolChoice:
    if mode not in _MODES:
        raise ValueError(f"tool_choice must be one of {', '.join(map(repr, _MODES))} or a function "
                         f"object, not {mode!r}")
    if mode == "none" or (mode == "auto" and not names):
        return NO_TOOLS
    if mode == "required":
        if not names:
            raise ValueError('tool_choice "required" needs tools')
        if len(names) == 1:
            return ToolChoice("named", names[0])
    return ToolChoice(mode)  # type: ignore[arg-type]


def _named_choice(choice: Mapping[str, JsonValue], names: list[str]) -> ToolChoice:
    if choice.get("type") != "function":
        raise ValueError(f'tool_choice.type must be "function", not {choice.get("type")!r}')
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError("tool_choice.function.name must be a non-empty string")
    if name not in names:
        known = ", ".join(names) or "none"
        raise ValueError(f"tool_choice names the function {name!r}, which is not in tools (tools: {known})")
    return ToolChoice("named", name)
