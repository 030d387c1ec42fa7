"""Request bodies of the OpenAI-compatible API (pydantic), and their mapping to ``SamplingParams``.

Invariants: unknown fields are ignored (clients send many we do not use); a wrong type is a
validation error (-> 400 via the app's handler); values the sampler cannot honour raise ``ValueError``
in ``sampling_params`` (-> 400). Agent hints: ``job_id`` with ``session_id`` as an alias.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from scheduler import SamplingParams

TokenIds = list[StrictInt]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class _CommonRequest(BaseModel):
    """Fields shared by completions and chat completions."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: StrictStr | list[StrictStr] | None = None
    stop_token_ids: list[StrictInt] | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    include_stop_str_in_output: bool = False
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    user: str | None = None
    # Scheduling and agent hints.
    priority: int = 0
    cache_salt: str | None = None
    return_token_ids: bool = False
    job_id: str | None = None
    session_id: str | None = None
    is_last_step: bool = False
    tool_name: str | None = None
    tool_ttl_hint: float | None = Field(default=None, ge=0)

    def hinted_job_id(self) -> str | None:
        return self.job_id or self.session_id

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class CompletionRequest(_CommonRequest):
    """``POST /v1/completions``: one prompt (text or token ids) or a list of prompts."""

    prompt: StrictStr | list[StrictStr] | TokenIds | list[TokenIds]
    logprobs: int | None = None
    echo: bool = False
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

    def as_template_dict(self) -> dict[str, Any]:
        """A plain dict for ``apply_chat_template``; text parts are joined, other parts rejected."""
        content = self.content
        if isinstance(content, list):
            texts = []
            for part in content:
                if part.type != "text" or part.text is None:
                    raise ValueError(f"unsupported message content part type {part.type!r}")
                texts.append(part.text)
            content = "".join(texts)
        d: dict[str, Any] = dict(self.model_extra or {})
        d.update({"role": self.role, "content": content or ""})
        if self.name is not None:
            d["name"] = self.name
        return d


class ChatCompletionRequest(_CommonRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None


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
    )
