"""``ServerState``: what the route handlers of one app share (the engine, metrics, model facts, limits).

Invariants:
- Handlers reach the engine only through this state's ``AsyncEngine`` (``admit`` hands their requests
  to its ``submit``; ``release_job``, ``stats``, ``tokenize``), never directly; engine failures leave here as
  ``APIError``s (503 engine unavailable, 400 invalid request).
- ``tenants`` (the API keys), ``open_metrics`` and ``max_waiting`` start from the ``ServerConfig`` and
  may be changed at runtime (tests do; ``api_key`` sets a single key); the middlewares and ``admit``
  read them per request.
- ``token_strs`` only grows: a token id's decoded text never changes for one tokenizer.
- Admission, before anything is queued: a request of more than ``max_prompts`` prompts is a 400; one
  that would put its tenant over ``tenant_max_requests`` requests in flight (queued or running) is a
  429 with ``Retry-After`` (that tenant only: the others keep their seats); one that would put the
  server over ``max_waiting`` queued requests is a 503 with ``Retry-After``; a turn that would open
  one agent job more than the tenant's ``open_jobs`` bound (``--tenant-max-open-jobs``,
  ``server.open_jobs``) is a 429 with ``Retry-After`` (turns of its open jobs always pass).
  ``inflight`` counts each tenant's accepted requests until their terminal event (so a client that
  stops reading a stream still holds its seat until the engine ends the request); a job's turn counts
  in ``open_jobs`` the same way, and a released job stops counting.
- While ``admit`` waits for the engine to accept a group (its prompts prepared, its grammar compiled),
  a client that disconnects aborts the group: its preparation stops and its compile is killed. A
  refused output constraint is a 400 with the refusal's code (``grammar_too_large``,
  ``grammar_compile_timeout``, ``grammar_admits_no_output``, ``invalid_grammar``); a compile worker
  killed from outside while it compiled is a 503 ``grammar_worker_died`` with ``Retry-After`` (the
  constraint is not to blame). A handler cancelled while it waits leaves its group aborted and its
  acceptance read (no "exception was never retrieved").
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request

from agent_engine.engine.engine_stats import EngineStats
from agent_engine.engine.grammar_build import GrammarRefused
from agent_engine.engine.grammar_workers import GrammarWorkerDied
from agent_engine.server.async_engine import AsyncEngine, EngineDeadError, EngineStoppedError, RequestSpec
from agent_engine.server.auth import Tenants
from agent_engine.server.edge_middleware import ByteBuckets
from agent_engine.server.errors import APIError, bad_request
from agent_engine.server.groups import RequestGroup
from agent_engine.server.metrics import ServerMetrics
from agent_engine.server.open_jobs import OpenJobs, TooManyOpenJobs
from agent_engine.server.server_config import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_PROMPTS
from scheduler.job_hints import tenant_job_id

RETRY_AFTER_S = "1"


@dataclass
class ServerState:
    """Per-app state, kept on ``app.state.server``."""

    engine: AsyncEngine
    metrics: ServerMetrics
    model_name: str
    max_model_len: int
    max_waiting: int | None = None
    tenant_max_requests: int | None = None
    max_prompts: int = DEFAULT_MAX_PROMPTS
    tenants: Tenants = field(default_factory=Tenants)
    open_metrics: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = 30.0
    body_buckets: ByteBuckets | None = None  # with several tenants
    created: int = field(default_factory=lambda: int(time.time()))
    token_strs: dict[int, str] = field(default_factory=dict)
    last_stats: EngineStats | None = None
    inflight: dict[str | None, int] = field(default_factory=dict)
    open_jobs: OpenJobs = field(default_factory=lambda: OpenJobs(None))

    @property
    def api_key(self) -> str | None:
        """The one key when there is exactly one (tests and embedders set a single key this way)."""
        return next(iter(self.tenants.keys)) if len(self.tenants.keys) == 1 else None

    @api_key.setter
    def api_key(self, key: str | None) -> None:
        self.tenants = Tenants.from_keys([key] if key else [])

    def check_model(self, model: str | None) -> None:
        """404 unless ``model`` is unset, the served model's name, or the ``--model`` it was started with."""
        started_as = self.engine.engine.config.model
        if model and model not in (self.model_name, started_as):
            raise APIError(404, f"the model '{model}' does not exist; this server serves '{self.model_name}'",
                           param="model", code="model_not_found")

    async def admit(self, specs: list[RequestSpec], request: Request | None = None) -> RequestGroup:
        """Admit the requests (the limits above), submit them to the engine and wait for it to accept
        them; maps failures to API errors. With ``request``, a client that disconnects meanwhile aborts
        them (then a 499 nobody reads)."""
        tenant = specs[0].hints.tenant if specs else None
        self._check_admission(tenant, len(specs))
        self._check_top_k(specs)
        self._check_open_jobs(specs)
        try:
            group = self.engine.submit(specs)
            self._count_inflight(tenant, group, self._open_job_turn(specs))
            await _accepted_unless_gone(group, request)
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        except GrammarWorkerDied as exc:  # killed from outside: not the constraint's fault
            raise APIError(503, str(exc), code="grammar_worker_died", headers={"Retry-After": RETRY_AFTER_S}) from exc
        except GrammarRefused as exc:
            raise bad_request(str(exc), code=exc.code) from exc
        except ValueError as exc:
            code = "context_length_exceeded" if "max_model_len" in str(exc) else "invalid_request"
            raise bad_request(str(exc), code=code) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("jinja2"):
                raise bad_request(f"chat template failed: {exc}", param="messages") from exc
            raise
        return group

    async def release_job(self, job_id: str, tenant: str | None = None) -> bool:
        """Release the job's pin (True if it held one); 404 when the job is unknown to ``tenant`` (never
        seen, already over, or another tenant's)."""
        engine_job = tenant_job_id(tenant, job_id)  # the one scoping, as ``JobHints.scoped`` applies it
        try:
            released = await self.engine.release_job(engine_job)
        except (EngineDeadError, EngineStoppedError) as exc:
            raise APIError(503, str(exc), code="engine_unavailable") from exc
        self.open_jobs.release(tenant, job_id)
        if released is None:
            raise APIError(404, f"no live job {job_id!r}", param="job_id", code="job_not_found")
        self.metrics.on_job_released(tenant)
        return released

    async def refresh_stats(self) -> EngineStats | None:
        """A fresh engine stats snapshot while the engine is healthy, else the last one taken (None: none yet)."""
        if self.engine.healthy:
            try:
                self.last_stats = await self.engine.stats()
            except (EngineDeadError, EngineStoppedError):
                pass
        return self.last_stats

    async def fill_token_strs(self, ids: list[int]) -> dict[int, str]:
        """Decoded text of each token id (cached; decoding runs on the tokenizer thread)."""
        missing = sorted({t for t in ids if t not in self.token_strs})
        if missing:
            got = await self.engine.tokenize(lambda e: {t: e.tokenizer.decode([t]) for t in missing})
            self.token_strs.update(got)
        return self.token_strs

    def _check_top_k(self, specs: list[RequestSpec]) -> None:
        vocab = self.engine.engine.vocab_size
        if any(spec.params.top_k > vocab for spec in specs):
            raise bad_request(f"top_k must be -1, 0 or at most the vocabulary size ({vocab})", param="top_k")

    def _check_admission(self, tenant: str | None, n_new: int) -> None:
        if n_new > self.max_prompts:
            raise bad_request(f"at most {self.max_prompts} prompts per request (--max-prompts-per-request)",
                              param="prompt", code="too_many_prompts")
        cap = self.tenant_max_requests
        if cap is not None and self.inflight.get(tenant, 0) + n_new > cap:
            raise APIError(429, f"this key has {self.inflight.get(tenant, 0)} requests in flight "
                                f"(at most {cap}); retry later", code="rate_limit_exceeded",
                           headers={"Retry-After": RETRY_AFTER_S})
        if self.max_waiting is not None and self.engine.num_queued() + n_new > self.max_waiting:
            raise APIError(503, f"too many queued requests (max {self.max_waiting}); retry later",
                           code="server_overloaded", headers={"Retry-After": RETRY_AFTER_S})

    def _check_open_jobs(self, specs: list[RequestSpec]) -> None:
        """429 when the requests' turn would open one job more than its tenant may hold open."""
        if not specs:
            return
        hints = specs[0].hints
        try:
            self.open_jobs.check(hints.tenant, hints.job_id, hints.is_last_step)
        except TooManyOpenJobs as exc:
            raise APIError(429, str(exc), param="job_id", code="rate_limit_exceeded",
                           headers={"Retry-After": str(math.ceil(exc.retry_after))}) from exc

    def _open_job_turn(self, specs: list[RequestSpec]) -> Callable[[], None] | None:
        """Count the requests' turn of their job in ``open_jobs`` (the requests of one call share it)."""
        hints = specs[0].hints if specs else None
        return None if hints is None else self.open_jobs.turn_started(hints.tenant, hints.job_id, hints.is_last_step)

    def _count_inflight(self, tenant: str | None, group: RequestGroup,
                        turn_ended: Callable[[], None] | None = None) -> None:
        """``inflight[tenant]`` grows by the group's size now and shrinks as its requests end;
        ``turn_ended`` is called once, when the last of them has ended."""
        self.inflight[tenant] = self.inflight.get(tenant, 0) + len(group.request_ids)
        running = len(group.request_ids)
        turn = [turn_ended] if turn_ended is not None else []

        def ended(n: int) -> None:
            nonlocal running
            left = self.inflight.get(tenant, 0) - n
            if left > 0:
                self.inflight[tenant] = left
            else:
                self.inflight.pop(tenant, None)
            running -= n
            if running <= 0 and turn:
                turn.pop()()

        group.on_end = ended


CLIENT_CLOSED = 499


async def wait_disconnect(request: Request) -> None:
    """Return when the client goes away (the body has been read already, so receive() only reports that)."""
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            return


async def _accepted_unless_gone(group: RequestGroup, request: Request | None) -> None:
    """Wait for the group's acceptance (raising its rejection); abort it if the client leaves first."""
    if request is not None:
        gone = asyncio.ensure_future(wait_disconnect(request))
        try:
            await asyncio.wait({group.acceptance, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the handler was cancelled (the server closes): nobody reads it
            group.acceptance.add_done_callback(_consume_result)
            group.abort()
            raise
        finally:
            gone.cancel()
        if not group.acceptance.done():
            group.acceptance.add_done_callback(_consume_result)
            group.abort()
            raise APIError(CLIENT_CLOSED, "the client closed the request", code="client_closed_request")
    await group.accepted()


def _consume_result(fut: asyncio.Future[None]) -> None:
    """Mark a future nobody awaits any more as read (no "exception was never retrieved" at exit)."""
    if not fut.cancelled():
        fut.exception()


def server_state(request: Request) -> ServerState:
    """The ``ServerState`` of the app serving ``request`` (a FastAPI dependency)."""
    return request.app.state.server
