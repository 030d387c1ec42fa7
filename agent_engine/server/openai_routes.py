"""The HTTP routes: OpenAI-compatible completions and chat, models, job release, health and metrics.

Invariants:
- Handlers run on the event loop and never touch the engine: they build ``RequestSpec``s, hand them to
  ``ServerState.admit`` and the accepted group to ``respond`` (one JSON body) or ``sse_stream``.
- Request-level problems (unknown model, bad values, empty prompts) are ``APIError``s raised before
  anything is submitted, so a rejected call leaves nothing running.
- Agent hints (the job and its source) come from ``server.hints``: every session convention clients
  send, in one documented precedence.
- A JSON schema keyword the grammar library does not enforce is a 400 under ``strict`` and otherwise
  named in the ``X-Structured-Output-Ignored`` header of the answer (``structured_request``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agent_engine.json_types import JsonObject
from agent_engine.server.async_engine import EngineDeadError, EngineStoppedError, RequestSpec
from agent_engine.server.auth import metrics_viewer, tenant_of_scope
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.errors import APIError, bad_request, error_body
from agent_engine.server.groups import RequestGroup
from agent_engine.server.hints import request_hints
from agent_engine.server.openai_call import ApiCall
from agent_engine.server.openai_reply import respond, sse_stream
from agent_engine.server.openai_schema import ChatCompletionRequest, CompletionRequest, sampling_params
from agent_engine.server.state import ServerState, server_state
from agent_engine.server.structured_request import UnenforcedSchemaError, ignored_header, unenforced_parts
from agent_engine.server.tools import parse_tool_choice
from agent_engine.server.tools.plan import ToolPlan, configured_family
from scheduler import JobHints, SamplingParams, StructuredSpec

DEFAULT_COMPLETION_MAX_TOKENS = 16
PROMETHEUS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"

State = Annotated[ServerState, Depends(server_state)]
router = APIRouter()


@router.get("/health")
async def health(state: State) -> Response:
    """200 while the engine serves; 503 once its loop died, or while it has work and has not advanced
    for ``--health-stall-timeout`` seconds (a load balancer takes the replica out)."""
    problem = state.engine.health_problem
    if problem is None:
        return JSONResponse({"status": "ok"})
    return JSONResponse(error_body(f"unhealthy: {problem}", "service_unavailable_error", None, "unhealthy"),
                        status_code=503)


@router.get("/metrics")
async def prometheus(request: Request, state: State) -> Response:
    stats = await state.refresh_stats()
    sees_all, tenant = metrics_viewer(request.scope, state.tenants)
    return Response(state.metrics.render(stats, tenant, sees_all), media_type=PROMETHEUS_MEDIA_TYPE)


@router.get("/v1/models")
async def models(state: State) -> dict[str, Any]:
    return {"object": "list", "data": [{
        "id": state.model_name, "object": "model", "created": state.created, "owned_by": "agent-engine",
        "max_model_len": state.max_model_len, "root": state.model_name,
    }]}


@router.delete("/v1/jobs/{job_id:path}")
async def release_job(job_id: str, request: Request, state: State) -> dict[str, Any]:
    released = await state.release_job(job_id, tenant_of_scope(request.scope))
    return {"id": job_id, "object": "job", "deleted": True, "released_pin": released}


@router.post("/v1/completions")
async def completions(req: CompletionRequest, request: Request, state: State) -> Response:
    state.check_model(req.model)
    prompts = _prompts(req)
    params = _params(req, DEFAULT_COMPLETION_MAX_TOKENS if req.max_tokens is None else req.max_tokens)
    hints = await _hints(request)
    ignored = await unenforced_schema(state, _strict(req), params.structured, None, hints.tenant)
    base = f"cmpl-{uuid.uuid4().hex}"
    ids = [base] if len(prompts) == 1 else [f"{base}-{i}" for i in range(len(prompts))]
    specs = [RequestSpec(rid, p, params, hints=hints) for rid, p in zip(ids, prompts, strict=True)]
    group = await state.admit(specs, request)
    call = ApiCall(base, state, req, hints.job_id, int(time.time()), chat=False)
    return with_headers(await _reply(call, group, request), ignored_header(ignored))


@router.post("/v1/chat/completions")
async def chat(req: ChatCompletionRequest, request: Request, state: State) -> Response:
    state.check_model(req.model)
    messages = _template_messages(req)
    try:
        plan = ToolPlan(req.tool_dicts(), parse_tool_choice(req.tool_choice, req.tools),
                        configured_family(request.app.state), parallel=req.parallel_tool_calls is not False)
    except ValueError as exc:
        raise bad_request(str(exc), param="tool_choice") from exc
    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    params = _params(req, requested if requested is not None else max(1, req.min_tokens))
    if params.structured is not None and plan.choice.parses:
        raise bad_request('an output format cannot be combined with tools unless tool_choice is "none"',
                          param="response_format", code="unsupported_parameter")
    hints = await _hints(request)
    tools = req.tool_dicts() if plan.choice.parses else None
    ignored = await unenforced_schema(state, _strict(req), params.structured, tools, hints.tenant)
    base = f"chatcmpl-{uuid.uuid4().hex}"
    spec = RequestSpec(base, _chat_prompt(messages, plan), params, fill_max_tokens=requested is None,
                       hints=hints, constraint=plan.constraint, tool_reader=plan.output_reader)
    group = await state.admit([spec], request)
    call = ApiCall(base, state, req, hints.job_id, int(time.time()), chat=True, tools=plan.parser)
    return with_headers(await _reply(call, group, request), ignored_header(ignored))


async def _reply(call: ApiCall, group: RequestGroup, request: Request) -> Response:
    if call.req.stream:
        return StreamingResponse(sse_stream(call, group), media_type="text/event-stream")
    return await respond(call, group, request)


def _prompts(req: CompletionRequest) -> list[str | list[int]]:
    prompts = req.prompts()
    if not prompts or any(len(p) == 0 for p in prompts):
        raise bad_request("prompt must not be empty", param="prompt")
    return prompts


def _template_messages(req: ChatCompletionRequest) -> list[JsonObject]:
    """The messages as template dicts; a 400 naming any field the server cannot honour."""
    unsupported = req.unsupported_fields()
    if unsupported:
        field, reason = unsupported[0]
        raise bad_request(reason, param=field, code="unsupported_parameter")
    try:
        return [m.as_template_dict() for m in req.messages]
    except ValueError as exc:
        raise bad_request(str(exc), param="messages") from exc


def _chat_prompt(messages: list[JsonObject], plan: ToolPlan) -> Callable[[EngineLike], str]:
    """The prompt as a function of the engine: the chat template (with the request's tools) is applied on
    the tokenizer pool. When the output is read for tool calls, ``plan.output_reader`` (the spec's
    ``tool_reader``) gives that reader to the request, so the estimator sees the calls the API returns."""

    def render(engine: EngineLike) -> str:
        return plan.render(engine.tokenizer, messages)

    return render


async def _hints(request: Request) -> JobHints:
    """The job and scheduling hints of a request, by the precedence in ``server.hints`` (400 on a bad one)."""
    try:
        return request_hints(await request.json(), request.headers, tenant_of_scope(request.scope))
    except ValueError as exc:
        raise bad_request(str(exc), code="invalid_hint") from exc


def _strict(req: CompletionRequest | ChatCompletionRequest) -> bool:
    """Whether the output format is a ``json_schema`` with ``strict: true``."""
    fmt = req.response_format
    return fmt is not None and fmt.json_schema is not None and fmt.json_schema.strict is True


async def unenforced_schema(state: ServerState, strict: bool, spec: StructuredSpec | None,
                            tools: list[JsonObject] | None, tenant: str | None) -> list[str]:
    """What of the request's schemas will not be enforced (``structured_request.unenforced_parts``, on the
    tokenizer pool in the tenant's turn: a schema can be megabytes); a 400 for a strict one."""
    if spec is None and not tools:
        return []
    try:
        return await state.engine.tokenize(lambda _eng: unenforced_parts(spec, strict, tools), tenant)
    except UnenforcedSchemaError as exc:
        raise bad_request(str(exc), param=exc.param, code="unsupported_schema_keyword") from exc
    except (EngineDeadError, EngineStoppedError) as exc:
        raise APIError(503, str(exc), code="engine_unavailable") from exc


def with_headers(response: Response, headers: dict[str, str]) -> Response:
    """``response`` with ``headers`` added (before it is sent)."""
    response.headers.update(headers)
    return response


def _params(req: CompletionRequest | ChatCompletionRequest, max_tokens: int) -> SamplingParams:
    try:
        return sampling_params(req, max_tokens)
    except ValueError as exc:
        raise bad_request(str(exc)) from exc
