"""The Messages API routes: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

Invariants:
- Handlers never touch the engine directly: a request is converted to the chat form (``convert``),
  rendered by ``prompt`` on the tokenizer thread, submitted as one ``RequestSpec`` through
  ``ServerState.admit`` and answered by ``reply`` (one body) or ``streaming`` (SSE), like chat.
- Every problem found before submitting (unknown model, a conversation that cannot be converted, a
  bad hint) is an ``APIError``, so a rejected call leaves nothing running; the app renders every error
  on these paths as an Anthropic body.
- ``max_tokens`` is an upper bound: it is capped at the room the prompt leaves under the model's
  context (Claude Code asks for more than small models hold); a prompt that leaves no room is a 400.
- A request is rendered through ``prompt_of`` for both routes, so the counted tokens are the tokens the
  model sees. Tools, tool calls and tool results are rendered exactly as for ``/v1/chat/completions``
  (``ToolPlan``: the server's ``--tool-call-parser`` family, else the chat template's); a forcing
  ``tool_choice`` ends the prompt with the opening of a call, and the plan's parser reads it back. An
  assistant prefill is appended after the generation prompt, so the reply continues it (never together
  with a forced call: ``convert`` refuses that). When the output is read for tool calls, the engine's
  job hooks get the reader, so the estimator sees the calls the API returns.
- Job hints come from ``server.hints`` (``metadata.user_id``, ``X-Claude-Code-Session-Id``, ...); an
  explicit ``cache_control.ttl`` is the TTL hint when the body gives no ``tool_ttl_hint``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from agent_engine.server.anthropic.convert import ChatForm, to_chat_form
from agent_engine.server.anthropic.reply import MessagesCall, reply
from agent_engine.server.anthropic.schema import (
    CountTokensRequest,
    MessagesRequest,
    cache_ttl_hint,
    sampling_params,
)
from agent_engine.server.anthropic.streaming import message_stream
from agent_engine.server.async_engine import EngineDeadError, EngineStoppedError, RequestSpec
from agent_engine.server.auth import tenant_of_scope
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.errors import APIError, bad_request
from agent_engine.server.groups import RequestGroup
from agent_engine.server.hints import request_hints
from agent_engine.server.openai_routes import unenforced_schema, with_headers
from agent_engine.server.state import ServerState, server_state
from agent_engine.server.structured_request import ignored_header
from agent_engine.server.tools import parse_tool_choice
from agent_engine.server.tools.plan import ToolPlan, configured_family
from scheduler import JobHints

State = Annotated[ServerState, Depends(server_state)]
router = APIRouter()


@router.post("/v1/messages")
async def create_message(req: MessagesRequest, request: Request, state: State) -> Response:
    state.check_model(req.model)
    call = MessagesCall(req, _chat_form(req), state.model_name)
    plan = _plan(call.form, request)
    hints = await _hints(request, req)
    tools = call.form.tools if plan.choice.parses else None
    ignored = await unenforced_schema(state, False, None, tools, hints.tenant)
    group = await _submit(state, call, plan, hints, request)
    call.parser = plan.parser  # set by rendering, which ran before the engine accepted the request
    if req.stream:
        response: Response = StreamingResponse(message_stream(call, group), media_type="text/event-stream")
    else:
        response = await reply(call, group, request)
    return with_headers(response, ignored_header(ignored))


@router.post("/v1/messages/count_tokens")
async def count_tokens(req: CountTokensRequest, request: Request, state: State) -> dict[str, int]:
    state.check_model(req.model)
    form = _chat_form(req)
    render = prompt_of(form, _plan(form, request))
    try:
        n = await state.engine.tokenize(lambda eng: len(eng.tokenize_prompt(render(eng))[1]),
                                        tenant_of_scope(request.scope))  # off the engine thread, in the tenant's turn
    except (EngineDeadError, EngineStoppedError) as exc:
        raise APIError(503, str(exc), code="engine_unavailable") from exc
    except ValueError as exc:
        code = "context_length_exceeded" if "max_model_len" in str(exc) else "invalid_request"
        raise bad_request(str(exc), code=code) from exc
    return {"input_tokens": n}


def _chat_form(req: CountTokensRequest) -> ChatForm:
    try:
        return to_chat_form(req)
    except ValueError as exc:
        raise bad_request(str(exc), param="messages") from exc


def _plan(form: ChatForm, request: Request) -> ToolPlan:
    try:
        return tool_plan(form, configured_family(request.app.state))
    except ValueError as exc:
        raise bad_request(str(exc), param="tool_choice") from exc


async def _hints(request: Request, req: MessagesRequest) -> JobHints:
    try:
        hints = request_hints(await request.json(), request.headers, tenant_of_scope(request.scope))
    except ValueError as exc:
        raise bad_request(str(exc), code="invalid_hint") from exc
    if hints.tool_ttl_hint is None:
        hints = replace(hints, tool_ttl_hint=cache_ttl_hint(req))
    return hints


async def _submit(state: ServerState, call: MessagesCall, plan: ToolPlan, hints: JobHints,
                  request: Request) -> RequestGroup:
    """Submit with the requested ``max_tokens``, or capped at the room left when that does not fit."""
    fill = call.req.max_tokens >= state.max_model_len  # can never fit: cap at once
    try:
        return await state.admit([_spec(call, plan, hints, fill)], request)
    except APIError as exc:
        if fill or exc.code != "context_length_exceeded":
            raise
    return await state.admit([_spec(call, plan, hints, fill=True)], request)


def _spec(call: MessagesCall, plan: ToolPlan, hints: JobHints, fill: bool) -> RequestSpec:
    try:
        params = sampling_params(call.req, call.req.max_tokens)
    except ValueError as exc:
        raise bad_request(str(exc)) from exc
    return RequestSpec(call.id, prompt_of(call.form, plan), params, fill_max_tokens=fill, hints=hints,
                       constraint=plan.constraint, tool_reader=plan.output_reader)


def tool_plan(form: ChatForm, family: str | None) -> ToolPlan:
    """The request's tool plan (``family`` None: the chat template's). Raises ValueError."""
    return ToolPlan(form.tools, parse_tool_choice(form.tool_choice, form.tools), family, parallel=form.parallel)


def prompt_of(form: ChatForm, plan: ToolPlan) -> Callable[[EngineLike], str]:
    """The prompt as a function of the engine (run where its tokenizer lives); sets ``plan.parser``
    (whose reader of the output's calls, ``plan.output_reader``, the request carries)."""

    def render(engine: EngineLike) -> str:
        return plan.render(engine.tokenizer, form.messages) + form.prefill

    return render
