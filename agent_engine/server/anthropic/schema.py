"""Request bodies of the Anthropic Messages API (pydantic), and their mapping to ``SamplingParams``.

Invariants:
- Unknown top-level and block fields are ignored (clients such as Claude Code send fields this server
  has no use for); a wrong type or value is a validation error, rendered as a 400 Anthropic body.
- Content given as a string is stored as one text block, so ``system``, every message's ``content``
  and every ``tool_result``'s ``content`` are always lists of blocks after validation.
- ``image`` / ``document`` blocks are refused with a message saying they are unsupported; ``thinking``
  / ``redacted_thinking`` blocks (a client echoing an earlier reasoning turn) are accepted and dropped.
- ``thinking`` (the request option) is accepted and ignored: the served models have no separate
  reasoning channel, and Claude Code sends it by default.
- ``cache_control`` is accepted on every block and tool; an explicit ``ttl`` ("5m" / "1h") is a TTL hint
  in seconds (see ``cache_ttl_hint``). Without ``ttl`` it is no hint (clients mark every request).
- A tool's ``strict`` is a boolean (anything else is a 400) and is honoured exactly as an OpenAI
  function's ``strict``: it travels with the tool (``convert.tools_to_openai``), so a strict
  ``input_schema`` with a keyword the grammar library does not enforce is a 400
  ``unsupported_schema_keyword`` (``structured_request.unenforced_parts``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_engine.server.request_limits import FiniteFloat, check_json_body
from scheduler import SamplingParams

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,128}$"
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def _as_blocks(value: Any) -> Any:
    """A string becomes one text block, None no blocks; a list is validated block by block."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if value is not None and not isinstance(value, list):
        raise ValueError("content must be a string or a list of content blocks")
    return [] if value is None else value


class CacheControl(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["ephemeral"] = "ephemeral"
    ttl: Literal["5m", "1h"] | None = None


class _Block(BaseModel):
    model_config = ConfigDict(extra="ignore")
    cache_control: CacheControl | None = None


class TextBlock(_Block):
    type: Literal["text"]
    text: StrictStr


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: StrictStr = Field(min_length=1)
    name: StrictStr = Field(min_length=1)
    input: dict[str, Any]


class UnsupportedBlock(_Block):
    """A block type this server cannot take (no vision, no documents): always a validation error."""

    type: Literal["image", "document", "search_result", "container_upload"]

    @model_validator(mode="after")
    def _refuse(self) -> UnsupportedBlock:
        raise ValueError(f"{self.type} content blocks are not supported by this server (text only)")


class ThinkingBlock(_Block):
    """An earlier turn's reasoning echoed back by the client: accepted, not rendered."""

    type: Literal["thinking", "redacted_thinking"]


ResultContentBlock = Annotated[TextBlock | UnsupportedBlock, Field(discriminator="type")]


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: StrictStr = Field(min_length=1)
    content: list[ResultContentBlock] = Field(default_factory=list)
    is_error: bool = False

    _blocks = field_validator("content", mode="before")(_as_blocks)


ContentBlock = Annotated[TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | UnsupportedBlock,
                         Field(discriminator="type")]


class InputMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    _blocks = field_validator("content", mode="before")(_as_blocks)


class Tool(BaseModel):
    """A client tool (``type`` absent or "custom"); server tools (web search, ...) are refused."""

    model_config = ConfigDict(extra="ignore")
    type: StrictStr | None = None
    name: StrictStr = Field(pattern=TOOL_NAME_PATTERN)
    description: StrictStr | None = None
    input_schema: dict[str, Any]
    strict: StrictBool | None = None
    cache_control: CacheControl | None = None

    @field_validator("type")
    @classmethod
    def _custom_only(cls, value: str | None) -> str | None:
        if value not in (None, "custom"):
            raise ValueError(f"tool type {value!r} is not supported (only custom tools with an input_schema)")
        return value

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError('input_schema must be a JSON schema with "type": "object"')
        return value


class ToolChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["auto", "any", "tool", "none"]
    name: StrictStr | None = None
    disable_parallel_tool_use: bool = False

    @model_validator(mode="after")
    def _named(self) -> ToolChoice:
        if self.type == "tool" and not self.name:
            raise ValueError('tool_choice of type "tool" needs a name')
        return self


class ThinkingConfig(BaseModel):
    """Accepted and ignored (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None


class OutputConfig(BaseModel):
    """``effort`` is accepted and ignored; a structured-output ``format`` cannot be honoured (400)."""

    model_config = ConfigDict(extra="ignore")
    effort: StrictStr | None = None
    format: dict[str, Any] | None = None

    @field_validator("format")
    @classmethod
    def _no_format(cls, value: dict[str, Any] | None) -> None:
        if value is not None:
            raise ValueError("structured outputs (output_config.format) are not supported by this server")
        return value


class Metadata(BaseModel):
    model_config = ConfigDict(extra="ignore")
    user_id: StrictStr | None = None


class CountTokensRequest(BaseModel):
    """``POST /v1/messages/count_tokens``: what shapes the prompt, nothing about sampling."""

    model_config = ConfigDict(extra="ignore")
    model: StrictStr
    messages: list[InputMessage] = Field(min_length=1)
    system: list[TextBlock] = Field(default_factory=list)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None

    _system = field_validator("system", mode="before")(_as_blocks)
    _checked_body = model_validator(mode="before")(check_json_body)

    @model_validator(mode="after")
    def _choice_names_a_tool(self) -> CountTokensRequest:
        choice = self.tool_choice
        if choice is not None and choice.type in ("any", "tool") and not self.tools:
            raise ValueError(f'tool_choice "{choice.type}" needs tools')
        if choice is not None and choice.type == "tool" and choice.name not in {t.name for t in self.tools or ()}:
            raise ValueError(f"tool_choice names the tool {choice.name!r}, which is not in tools")
        return self


class MessagesRequest(CountTokensRequest):
    """``POST /v1/messages``."""

    max_tokens: StrictInt
    stop_sequences: list[Annotated[StrictStr, Field(min_length=1)]] | None = None
    stream: StrictBool = False
    temperature: FiniteFloat | None = Field(default=None, ge=0, le=1)
    top_p: FiniteFloat | None = Field(default=None, gt=0, le=1)
    top_k: StrictInt | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    output_config: OutputConfig | None = None
    cache_control: CacheControl | None = None
    # Server-side features of Anthropic's platform that this server cannot run: refused, never ignored.
    mcp_servers: Any = None
    container: Any = None

    @field_validator("mcp_servers", "container")
    @classmethod
    def _unsupported(cls, value: Any, info: ValidationInfo) -> None:
        if value is not None:
            raise ValueError(f"{info.field_name} is not supported by this server")
        return value

    @field_validator("max_tokens")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("max_tokens must be >= 1 (max_tokens 0, cache pre-warming, is not supported)")
        return value


def sampling_params(req: MessagesRequest, max_tokens: int) -> SamplingParams:
    """The request's ``SamplingParams``. Stop strings stay in the engine's text (``include_stop_str``)
    so the reply can name the one that matched; the reply strips it. Raises ValueError."""
    return SamplingParams(
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=0 if req.top_k is None else req.top_k,
        max_tokens=max_tokens,
        stop=tuple(req.stop_sequences or ()),
        include_stop_str_in_output=True,
    )


def cache_ttl_hint(req: CountTokensRequest) -> float | None:
    """The longest explicit ``cache_control.ttl`` of the request, in seconds (None if none is set)."""
    marks = [t.cache_control for t in req.tools or ()] + [getattr(req, "cache_control", None)]
    marks += [b.cache_control for b in req.system]
    for msg in req.messages:
        for block in msg.content:
            marks.append(block.cache_control)
            if isinstance(block, ToolResultBlock):
                marks += [b.cache_control for b in block.content]
    ttls = [TTL_SECONDS[m.ttl] for m in marks if m is not None and m.ttl is not None]
    return max(ttls, default=None)
