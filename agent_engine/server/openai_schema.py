"""Request bodies of the OpenAI-compatible API (pydantic), and their mapping to ``SamplingParams``.

Invariants: unknown fields are ignored (clients send many we do not use); a wrong type is a
validation error (-> 400 via the app's handler); values the sampler cannot honour raise ``ValueError``
in ``sampling_params`` (-> 400). Agent hints: ``job_id`` with ``session_id`` as an alias.
Output formats (``response_format``, ``structured_outputs``, ``guided_*``) become
``SamplingParams.structured``. Chat fields the server knows but cannot honour (legacy ``functions``,
``logit_bias``, audio, ...) are never dropped silently: ``unsupported_fields`` names them
(-> 400). Tools: function tools only, names ``[a-zA-Z0-9_-]{1,64}`` and unique, ``parameters`` an
object; ``tool_choice`` is checked against them by ``server.tools.parse_tool_choice``.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from agent_engine.server.request_limits import FiniteFloat, check_json_body
from agent_engine.server.structured_request import ResponseFormat, StructuredOutputs, requested_structure
from agent_engine.server.tools.tool_schema import MessageToolCall, ToolDef, arguments_value
from scheduler import SamplingParams, StructuredSpec

TokenIds = list[StrictInt]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class _CommonRequest(BaseModel):
    """Fields shared by completions and chat completions (strict scalars, finite floats, UTF-8 text)."""

    model_config = ConfigDict(extra="ignore")

    model: StrictStr | None = None
    max_tokens: StrictInt | None = None
    temperature: FiniteFloat | None = None
    top_p: FiniteFloat | None = None
    top_k: StrictInt | None = None
    seed: StrictInt | None = None
    stop: StrictStr | list[StrictStr] | None = None
    stop_token_ids: list[StrictInt] | None = None
    n: StrictInt = 1
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    ignore_eos: StrictBool = False
    min_tokens: StrictInt = 0
    include_stop_str_in_output: StrictBool = False
    presence_penalty: FiniteFloat | None = None
    frequency_penalty: FiniteFloat | None = None
    user: StrictStr | None = None
    # Scheduling and agent hints (``server.hints`` reads them from the raw body, with the conventions).
    priority: StrictInt = 0
    cache_salt: StrictStr | None = None
    return_token_ids: StrictBool = False
    job_id: StrictStr | None = None
    session_id: StrictStr | None = None
    is_last_step: StrictBool = False
    tool_name: StrictStr | None = None
    tool_ttl_hint: FiniteFloat | None = Field(default=None, ge=0)
    # Output formats (``server.structured_request``): at most one of them.
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | StrictStr | None = None
    guided_regex: StrictStr | None = None
    guided_choice: list[StrictStr] | None = None
    guided_grammar: StrictStr | None = None

    _checked_body = model_validator(mode="before")(check_json_body)

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def structure(self) -> StructuredSpec | None:
        """The output format asked for (None: free text). Raises ValueError."""
        guided = {name: getattr(self, name) for name in ("guided_json", "guided_regex", "guided_choice",
                                                        "guided_grammar")}
        return requested_structure(self.response_format, self.structured_outputs, guided)


class CompletionRequest(_CommonRequest):
    """``POST /v1/completions``: one prompt (text or token ids) or a list of prompts."""

    prompt: StrictStr | list[StrictStr] | TokenIds | list[TokenIds]
    logprobs: StrictInt | None = None
    echo: StrictBool = False
    best_of: StrictInt | None = None
    suffix: str | None = None

    def prompts(self) -> list[str | list[int]]:
        """The prompts as a list; a flat list of ints is one token-id prompt."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if not p:
            return []
        if isinstance(p[0], int):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str = "text"
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: StrictStr
    content: StrictStr | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: StrictStr | None = None

    @model_validator(mode="after")
    def _tool_fields(self) -> ChatMessage:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls are only allowed on assistant messages, not {self.role!r}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        return self

    def as_template_dict(self) -> dict[str, Any]:
        """A plain dict for chat templates: text parts joined (other parts rejected with ValueError),
        ``content`` "" when null, tool calls with ``arguments`` as a mapping when they are a JSON object
        (what tool-aware templates expect), ``tool_call_id`` kept. Extra keys reach the template only
        when their values are strings (``reasoning_content`` and the like); others are dropped."""
        d: dict[str, Any] = {k: v for k, v in (self.model_extra or {}).items() if isinstance(v, str)}
        d.update({"role": self.role, "content": self._text() or ""})
        if self.name is not None:
            d["name"] = self.name
        if self.tool_calls:
            d["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.function.name,
                                             "arguments": arguments_value(c.function)}}
                               for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        return d

    def _text(self) -> str | None:
        content = self.content
        if not isinstance(content, list):
            return content
        texts = []
        for part in content:
            if part.type != "text" or part.text is None:
                raise ValueError(f"unsupported message content part type {part.type!r} (only text)")
            texts.append(part.text)
        return "".join(texts)


class ChatCompletionRequest(_CommonRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = None
    logprobs: StrictBool = False
    top_logprobs: StrictInt | None = None
    tools: list[ToolDef] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    # Known fields the server cannot honour; ``unsupported_fields`` turns them into 400s.
    functions: list[Any] | None = None
    function_call: Any = None
    logit_bias: dict[str, Any] | None = None
    audio: Any = None
    modalities: list[str] | None = None
    prediction: Any = None
    web_search_options: Any = None

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, tools: list[ToolDef] | None) -> list[ToolDef] | None:
        names = [t.function.name for t in tools or () if t.function is not None]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(dup)}")
        return tools

    def tool_dicts(self) -> list[dict[str, Any]] | None:
        """The tools as plain OpenAI dicts (None when there are none)."""
        if not self.tools:
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]

    def unsupported_fields(self) -> list[tuple[str, str]]:
        """``(field, reason)`` for every field set to something the server cannot honour."""
        out = []
        for name in ("functions", "function_call"):
            if getattr(self, name) is not None:
                out.append((name, f"{name} is not supported; use tools and tool_choice"))
        if self.logit_bias:
            out.append(("logit_bias", "logit_bias is not supported"))
        if self.modalities is not None and set(self.modalities) - {"text"}:
            out.append(("modalities", "only the text modality is supported"))
        for name in ("audio", "prediction", "web_search_options"):
            if getattr(self, name) is not None:
                out.append((name, f"{name} is not supported"))
        return out


def sampling_params(req: CompletionRequest | ChatCompletionRequest, max_tokens: int) -> SamplingParams:
    """Map a request to ``SamplingParams`` (``max_tokens`` already resolved). Raises ValueError."""
    if req.n != 1:
        raise ValueError("only n=1 is supported")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name):
            raise ValueError(f"{name} is not supported")
    if isinstance(req, ChatCompletionRequest):
        if req.top_logprobs is not None and not req.logprobs:
            raise ValueError("top_logprobs requires logprobs=true")
        logprobs = (req.top_logprobs or 0) if req.logprobs else None
    else:
        if req.echo:
            raise ValueError("echo is not supported")
        if req.best_of not in (None, 1):
            raise ValueError("best_of is not supported (only 1)")
        if req.suffix:
            raise ValueError("suffix is not supported")
        logprobs = req.logprobs
    stop = req.stop if req.stop is not None else ()
    return SamplingParams(
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=0 if req.top_k is None else req.top_k,
        max_tokens=max_tokens,
        min_tokens=req.min_tokens,
        stop=stop,
        stop_token_ids=tuple(req.stop_token_ids or ()),
        ignore_eos=req.ignore_eos,
        seed=req.seed,
        logprobs=logprobs,
        include_stop_str_in_output=req.include_stop_str_in_output,
        structured=req.structure(),
    )
