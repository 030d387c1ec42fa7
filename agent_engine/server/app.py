"""The FastAPI app: ``build_app(async_engine, api_key=None, max_waiting=None) -> FastAPI``.

Invariants:
- Route handlers run on the event loop and never touch the engine: they submit ``RequestSpec``s to the
  ``AsyncEngine`` and read events from its asyncio queues; stats come from engine-thread snapshots.
- Every request that a handler submitted ends on the engine side: finished, or aborted when the client
  disconnects (streamed: Starlette cancels the generator; non-streamed: a disconnect watcher), when
  the handler fails, or at shutdown.
- Errors are OpenAI-style bodies (see ``errors``); failed engine steps map to 500 / an error event.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.async_engine import (
    AsyncEngine,
    EngineDeadError,
    EngineStoppedError,
    RequestGroup,
    RequestSpec,
)
from agent_engine.server.errors import APIError, bad_request, error_body, install_error_handlers
from agent_engine.server.metrics import ServerMetrics
from agent_engine.server.protocol import ChatCompletionRequest, CompletionRequest, sampling_params
from agent_engine.server.responses import (
    DONE,
    chat_logprobs,
    completion_logprobs,
    logprob_slice,
    sse,
    usage,
)

JOB_HEADERS = ("x-job-id", "x-session-id")
RETRY_AFTER_S = "1"


class _ApiKeyMiddleware:
    """Pure-ASGI bearer-token check for ``/v1/*`` against ``state.api_key`` (read per request, None = open).

    It does not wrap ``receive``, so client disconnects still reach the handlers."""

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        key = self.state.api_key
        if key and scope["type"] == "http" and scope.get("path", "").startswith("/v1"):
            auth = dict(scope.get("headers") or []).get(b"authorization")
            if auth != f"Bearer {key}".encode():
                err = APIError(401, "invalid or missing API key (send 'Authorization: Bearer KEY')",
                               code="invalid_api_key")
                await JSONResponse(err.body(), status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


@dataclass
class ServerState:
    """Per-app state; ``api_key`` and ``max_waiting`` may be changed at runtime (tests do)."""

    engine: AsyncEngine
    metrics: ServerMetrics
    model_name: str
    max_model_len: int
    max_waiting: int | None = None
    api_key: str | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    token_strs: dict[int, str] = field(default_factory=dict)
    last_stats: dict[str, Any] = field(default_factory=dict)

    def check_model(self, model: str | None) -> None:
        if model and model != self.model_name:
            raise APIError(404, f"the model '{model}' does not exist; this server serves '{self.model_name}'",
                           param="model", code="model_not_found")

    async def submit(self, specs: list[RequestSpec]) -> RequestGroup:
        """Queue the requests and wait for the engine to accept them; maps failures to API errors."""
        if self.max_waiting is not None and self.engine.num_queued() + len(specs) > self.max_waiting:
            raise APIError(503, f"too many queued requests (max {self.max_waiting}); retry later",
                           code="server_overloaded", headers={"Retry-After": RETRY_AFTER_S})
        try:
            group = self.engine.submit(specs)
            await group.accepted()
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        except ValueError as exc:
            code = "context_length_exceeded" if "max_model_len" in str(exc) else "invalid_request"
            raise bad_request(str(exc), code=code) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("jinja2"):
                raise bad_request(f"chat template failed: {exc}", param="messages") from exc
            raise
        return group

    async def fill_token_strs(self, ids: list[int]) -> dict[int, str]:
        """Decoded text of each token id (cached; decoding runs on the engine thread)."""
        missing = sorted({t for t in ids if t not in self.token_strs})
        if missing:
            got = await self.engine.call(lambda e: {t: e.tokenizer.decode([t]) for t in missing})
            self.token_strs.update(got)
        return self.token_strs


def _hints(req: CompletionRequest | ChatCompletionRequest, request: Request) -> dict[str, Any]:
    job_id = req.hinted_job_id()
    if job_id is None:
        job_id = next((request.headers[h] for h in JOB_HEADERS if request.headers.get(h)), None)
    return {"priority": req.priority, "cache_salt": req.cache_salt, "job_id": job_id,
            "is_last_step": req.is_last_step, "tool_name": req.tool_name, "tool_ttl_hint": req.tool_ttl_hint}


def _params(req: CompletionRequest | ChatCompletionRequest, max_tokens: int) -> Any:
    try:
        return sampling_params(req, max_tokens)
    except ValueError as exc:
        raise bad_request(str(exc)) from exc


async def _wait_disconnect(request: Request) -> None:
    """Return when the client goes away (the body has been read already, so receive() only reports that)."""
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            return


async def _collect(group: RequestGroup, request: Request) -> list[RequestOutput | None] | None:
    """Final output per index (None: aborted); None if the client disconnected (then all are aborted)."""
    finals: list[RequestOutput | None] = [None] * len(group.request_ids)

    async def consume() -> None:
        async for ev in group.events():
            if ev.error is not None:
                raise APIError(500, f"request failed: {ev.error}", code="engine_error")
            if ev.finished:
                finals[ev.index] = ev.output

    work = asyncio.ensure_future(consume())
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            work.result()
            return finals
        return None
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()
        group.abort()


def _check_finals(finals: list[RequestOutput | None]) -> list[RequestOutput]:
    out = []
    for f in finals:
        if f is None:
            raise APIError(503, "request aborted (server shutting down)", code="aborted")
        if f.outputs[0].finish_reason == "error":
            raise APIError(500, "the model step failed for this request; it may be retried",
                           code="engine_step_failed")
        out.append(f)
    return out


def _error_event(status: int, message: str, code: str) -> str:
    body = error_body(message, "internal_server_error" if status >= 500 else "invalid_request_error", None, code)
    body["error"]["status_code"] = status
    return sse(body)


def build_app(async_engine: AsyncEngine, api_key: str | None = None, max_waiting: int | None = None,
              *, drain_timeout: float = 10.0) -> FastAPI:
    """An app serving ``async_engine`` (started on app start-up, shut down on app shutdown)."""
    metrics = ServerMetrics()
    async_engine.output_listeners.append(metrics.on_output)
    async_engine.abort_listeners.append(metrics.on_abort)
    job_hooks = getattr(async_engine.engine, "job_hooks", None)
    if job_hooks is not None:
        job_hooks.job_listeners.append(metrics.on_job_finished)
    eng = async_engine.engine
    state = ServerState(async_engine, metrics, str(eng.model_name), int(eng.max_model_len), max_waiting,
                        api_key or None)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async_engine.start()
        yield
        # A plain thread, not the default executor (which refuses work during interpreter shutdown).
        stopper = threading.Thread(target=async_engine.shutdown, args=(drain_timeout,), daemon=True)
        stopper.start()
        while stopper.is_alive():
            await asyncio.sleep(0.02)

    app = FastAPI(title="agent-engine", lifespan=lifespan)
    app.state.server = state
    install_error_handlers(app)
    app.add_middleware(_ApiKeyMiddleware, state=state)

    @app.get("/health")
    async def health() -> Response:
        if async_engine.healthy:
            return JSONResponse({"status": "ok"})
        reason = async_engine.dead_reason or "engine loop not running"
        return JSONResponse(error_body(f"unhealthy: {reason}", "service_unavailable_error", None, "unhealthy"),
                            status_code=503)

    @app.get("/metrics")
    async def prometheus() -> Response:
        if async_engine.healthy:
            with contextlib.suppress(EngineDeadError, EngineStoppedError):
                state.last_stats = await async_engine.stats()
        body = metrics.render(state.last_stats)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": state.model_name, "object": "model", "created": state.created, "owned_by": "agent-engine",
            "max_model_len": state.max_model_len, "root": state.model_name,
        }]}

    @app.delete("/v1/jobs/{job_id}")
    async def release_job(job_id: str) -> dict[str, Any]:
        try:
            released = await async_engine.release_job(job_id)
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        metrics.on_job_released(job_id)
        return {"id": job_id, "object": "job", "deleted": True, "released_pin": released}

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request) -> Response:
        state.check_model(req.model)
        prompts = req.prompts()
        if not prompts or any(len(p) == 0 for p in prompts):
            raise bad_request("prompt must not be empty", param="prompt")
        params = _params(req, 16 if req.max_tokens is None else req.max_tokens)
        hints = _hints(req, request)
        base = f"cmpl-{uuid.uuid4().hex}"
        ids = [base] if len(prompts) == 1 else [f"{base}-{i}" for i in range(len(prompts))]
        group = await state.submit([RequestSpec(rid, p, params, **hints) for rid, p in zip(ids, prompts, strict=True)])
        ctx = _Ctx(base, state, req, hints["job_id"], int(time.time()), chat=False)
        if req.stream:
            return StreamingResponse(ctx.stream(group), media_type="text/event-stream")
        return await ctx.respond(group, request)

    @app.post("/v1/chat/completions")
    async def chat(req: ChatCompletionRequest, request: Request) -> Response:
        state.check_model(req.model)
        try:
            messages = [m.as_template_dict() for m in req.messages]
        except ValueError as exc:
            raise bad_request(str(exc), param="messages") from exc
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        params = _params(req, requested if requested is not None else max(1, req.min_tokens))

        def render(e: Any) -> str:
            return e.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

        hints = _hints(req, request)
        base = f"chatcmpl-{uuid.uuid4().hex}"
        group = await state.submit([RequestSpec(base, render, params, fill_max_tokens=requested is None, **hints)])
        ctx = _Ctx(base, state, req, hints["job_id"], int(time.time()), chat=True)
        if req.stream:
            return StreamingResponse(ctx.stream(group), media_type="text/event-stream")
        return await ctx.respond(group, request)

    return app


@dataclass
class _Ctx:
    """Formats one API call's responses (completions or chat; streamed or not)."""

    id: str
    state: ServerState
    req: CompletionRequest | ChatCompletionRequest
    job_id: str | None
    created: int
    chat: bool

    def _head(self, obj: str) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "object": obj, "created": self.created, "model": self.state.model_name}
        if self.job_id is not None:
            d["job_id"] = self.job_id
        return d

    def _wants_logprobs(self) -> bool:
        return bool(self.req.logprobs) if self.chat else self.req.logprobs is not None

    async def _logprobs(self, out: RequestOutput, start: int, text_offset: int = 0) -> dict[str, Any] | None:
        if not self._wants_logprobs():
            return None
        ids, lps, top = logprob_slice(out, start)
        need = list(ids) + [t for alts in (top or []) for t, _ in alts]
        strs = await self.state.fill_token_strs(need)
        if self.chat:
            return chat_logprobs(ids, lps, top, strs)
        return completion_logprobs(ids, lps, top, strs, text_offset)

    # ---- non-streamed ----
    async def respond(self, group: RequestGroup, request: Request) -> Response:
        finals = await _collect(group, request)
        if finals is None:
            return Response(status_code=499)  # the client is gone; nobody reads this
        outs = _check_finals(finals)
        choices = []
        for i, out in enumerate(outs):
            comp = out.outputs[0]
            choice: dict[str, Any] = {"index": i, "finish_reason": comp.finish_reason,
                                      "logprobs": await self._logprobs(out, 0)}
            if self.chat:
                choice["message"] = {"role": "assistant", "content": comp.text}
            else:
                choice["text"] = comp.text
            if self.req.return_token_ids:
                choice["token_ids"] = list(comp.token_ids)
                if not self.chat:
                    choice["prompt_token_ids"] = list(out.prompt_token_ids)
            choices.append(choice)
        body = self._head("chat.completion" if self.chat else "text_completion")
        body["choices"] = choices
        body["usage"] = usage(sum(len(o.prompt_token_ids) for o in outs),
                              sum(len(o.outputs[0].token_ids) for o in outs),
                              sum(o.num_cached_tokens for o in outs))
        if self.req.return_token_ids:
            pids = [list(o.prompt_token_ids) for o in outs]
            body["prompt_token_ids"] = pids[0] if len(pids) == 1 else pids
        return JSONResponse(body)

    # ---- streamed ----
    async def stream(self, group: RequestGroup) -> AsyncIterator[str]:
        """SSE events; aborts the group's requests when the client goes away (generator cancelled)."""
        n = len(group.request_ids)
        sent_tokens = [0] * n
        text_offset = [0] * n
        started = [False] * n
        prompt_tokens = [0] * n
        cached = [0] * n
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        try:
            async for ev in group.events():
                if ev.error is not None:
                    yield _error_event(500, f"request failed: {ev.error}", "engine_error")
                    break
                out = ev.output
                if out is not None and out.outputs[0].finish_reason == "error":
                    yield _error_event(500, "the model step failed for this request", "engine_step_failed")
                    break
                i = ev.index
                finish = "abort" if out is None else out.outputs[0].finish_reason
                choice: dict[str, Any] = {"index": i}
                if out is not None:
                    prompt_tokens[i] = len(out.prompt_token_ids)
                    cached[i] = out.num_cached_tokens
                    choice["logprobs"] = await self._logprobs(out, sent_tokens[i], text_offset[i])
                    new_ids = list(out.outputs[0].token_ids[sent_tokens[i]:])
                    sent_tokens[i] = len(out.outputs[0].token_ids)
                    text_offset[i] += len(out.new_text)
                    if self.req.return_token_ids:
                        choice["token_ids"] = new_ids
                        if not started[i] and not self.chat:
                            choice["prompt_token_ids"] = list(out.prompt_token_ids)
                    delta_text = out.new_text
                else:
                    delta_text, new_ids = "", []
                if self.chat:
                    delta: dict[str, Any] = {"content": delta_text}
                    if not started[i]:
                        delta["role"] = "assistant"
                    choice["delta"] = delta
                else:
                    choice["text"] = delta_text
                choice["finish_reason"] = finish
                if not (delta_text or new_ids or finish or not started[i]):
                    continue
                started[i] = True
                chunk = self._head(obj)
                chunk["choices"] = [choice]
                if self.req.return_token_ids and self.chat and "prompt_token_ids" not in chunk and out is not None \
                        and sent_tokens[i] == len(new_ids):
                    chunk["prompt_token_ids"] = list(out.prompt_token_ids)
                yield sse(chunk)
            else:
                if self.req.include_usage():
                    chunk = self._head(obj)
                    chunk["choices"] = []
                    chunk["usage"] = usage(sum(prompt_tokens), sum(sent_tokens), sum(cached))
                    yield sse(chunk)
            yield DONE
        finally:
            group.abort()

