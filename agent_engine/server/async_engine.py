"""``AsyncEngine``: one ``LLMEngine`` driven by one background thread, fed from asyncio.

Invariants:
- Exactly one thread (the engine thread) ever changes or reads the ``LLMEngine`` (the tokenizer pool
  only reads its tokenizer): what reaches it are commands, small frozen messages of a closed set
  (``engine_commands``: add, abort, release a job, take stats or routing stats, ask whether it is busy)
  on a lock-protected queue it drains before each step, dispatched by ``match``; no closure crosses
  threads.
- The engine thread never busy-spins: with no commands and no unfinished requests it blocks on a
  condition variable (waking every ``idle_tick`` seconds only while pins are live, so their TTLs expire).
- Every submitted request ends with exactly one terminal event on its group's asyncio queue: a
  finished ``RequestOutput``, an abort, or an error (the engine failed the step, or the loop died);
  the per-request side of this lives in ``groups``. If the engine thread dies, ``healthy`` turns
  False, every pending request and question fails with ``EngineDeadError``, later submissions at once.
- ``shutdown`` stops intake, lets running requests finish until a deadline, aborts the rest, then joins;
  the loop's last act is ``release_and_account`` (every pin released, the final account logged).
- ``submit`` is the one way in: a route's ``RequestSpec``s (a prompt or how to render it, sampling
  params, the client's hints) become ``EngineRequest``s, the engine's one request message, off the
  event loop and the engine thread, on a pool shared fairly by tenants (``tokenizer_pool``): the chat
  template rendered, the prompt tokenized once, ``max_tokens`` filled, the hints scoped to the tenant
  (``JobHints.scoped``). A huge prompt stalls neither the engine's steps nor another tenant's
  preparation. The engine thread gets a group's messages together (``AddRequests``; different
  tenants' groups may overtake each other while being prepared) and hands each to ``add_request``.
- Then each new output constraint is compiled (``grammar_compiles``: fair lanes, a budget per
  compile, cancellation). A group reaches the engine thread only with every grammar ready, so the step
  loop never compiles; a refused constraint rejects the group (its ``GrammarRefused`` is the client's
  400); ``RequestGroup.abort`` while a group is being prepared cancels its preparation. Once a drain
  begins (``begin_drain``: SIGTERM) the engine thread closes the grammar lanes: queued and running
  compiles are answered at once (their groups rejected with ``EngineStoppedError``, a 503) and running
  trial compiles' workers killed, so shutdown waits for no compile.
- Health (``health_problem``): the loop is unhealthy once it died, and while one iteration (commands
  plus one step) has run longer than ``stall_timeout`` seconds: a step loop that stopped advancing
  while it has work. An idle loop (blocked, nothing to do) is healthy however long it sleeps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.engine_stats import EngineStats, RoutingStats
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.grammar_workers import GrammarCancelled
from agent_engine.engine.outputs import RequestOutput
from agent_engine.engine.prompts import PromptType
from agent_engine.server.engine_commands import (
    AbortRequests,
    AddRequests,
    CheckBusy,
    Command,
    Question,
    ReleaseJob,
    TakeRoutingStats,
    TakeStats,
    fail,
    resolve,
)
from agent_engine.server.engine_like import EngineLike, release_and_account
from agent_engine.server.grammar_compiles import GrammarCompiles
from agent_engine.server.groups import (
    EngineDeadError,
    EngineStoppedError,
    LiveRequests,
    RequestGroup,
    reject,
)
from agent_engine.server.server_config import DEFAULT_STALL_TIMEOUT_S, ServerConfig
from agent_engine.server.tokenizer_pool import FairTokenizerPool, PoolClosedError
from scheduler import NO_HINTS, JobHints, SamplingParams, StructuredSpec
from scheduler.turn_output import ToolReader

logger = logging.getLogger(__name__)

OutputListener = Callable[[RequestOutput, float], None]
AbortListener = Callable[[str, str | None], None]  # (request id, tenant)
RenderPrompt = Callable[[EngineLike], str]  # a prompt rendered with the engine's tokenizer (a chat template)

T = TypeVar("T")


@dataclass(frozen=True)
class RequestSpec:
    """One request as a route describes it, before it is prepared into an ``EngineRequest``.

    ``prompt`` is text, token ids, or a ``RenderPrompt`` run on the tokenizer pool. With
    ``fill_max_tokens`` the prompt is tokenized first and ``max_tokens`` becomes
    ``max_model_len - prompt_len`` (vLLM's behaviour when a client leaves max_tokens unset).
    ``hints`` are the client's, unscoped: preparation applies the tenant's namespace.
    ``constraint``, when given, is called after the prompt is rendered (it may depend on what rendering
    chose, e.g. the tool-call family); a spec it returns becomes ``params.structured``. ``tool_reader``
    likewise: the reader of the output's tool calls it returns travels on the ``EngineRequest``.
    """

    request_id: str
    prompt: PromptType | RenderPrompt
    params: SamplingParams
    fill_max_tokens: bool = False
    hints: JobHints = NO_HINTS
    constraint: Callable[[], StructuredSpec | None] | None = None
    tool_reader: Callable[[], ToolReader | None] | None = None


class AsyncEngine:
    """Owns the engine thread. Construct, ``start()``, then submit from an asyncio event loop."""

    def __init__(self, engine: EngineLike, *, idle_tick: float = 0.5, share_prefix_cache: bool = False,
                 tokenizer_workers: int = 2, grammar_limits: GrammarLimits | None = None,
                 stall_timeout: float = DEFAULT_STALL_TIMEOUT_S) -> None:
        if not stall_timeout > 0:
            raise ValueError("the health stall timeout must be > 0 seconds")
        self.engine = engine
        self.idle_tick = idle_tick
        self.share_prefix_cache = share_prefix_cache
        self.stall_timeout = stall_timeout
        self.max_request_tokens: int | None = None  # prompts + max_tokens of one group (None: unbounded)
        self.output_listeners: list[OutputListener] = []
        self.abort_listeners: list[AbortListener] = []
        self._cond = threading.Condition()
        self._commands: deque[Command] = deque()
        self._thread: threading.Thread | None = None
        self._dead: BaseException | None = None
        self._accepting = True
        self._stop_deadline: float | None = None
        self._stopped = threading.Event()
        self._live = LiveRequests()  # engine thread only
        self._queued: set[str] = set()  # event loop only: submitted, no event yet
        self._tokenizer_pool = FairTokenizerPool(tokenizer_workers)
        self._grammars = GrammarCompiles(engine, grammar_limits or GrammarLimits())
        self._busy_since: float | None = None  # start of the loop's current iteration; None while idle
        self._preparing: set[asyncio.Future[None]] = set()  # event loop only: keeps tasks alive

    @property
    def grammar_limits(self) -> GrammarLimits:
        return self._grammars.limits

    @classmethod
    def from_config(cls, engine: EngineLike, config: ServerConfig) -> AsyncEngine:
        """An ``AsyncEngine`` with the server config's tokenizer workers, grammar limits and stall timeout."""
        return cls(engine, tokenizer_workers=config.tokenizer_workers, grammar_limits=config.grammar_limits,
                   stall_timeout=config.health_stall_timeout)

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> AsyncEngine:
        """Start the engine thread (idempotent), and measure the tokenizer's longest token on a thread of
        its own (a second on large vocabularies: not on the first long prompt)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
            self._thread.start()
            threading.Thread(target=getattr, args=(self.engine, "max_token_bytes", None), daemon=True).start()
        return self

    @property
    def healthy(self) -> bool:
        return self.health_problem is None

    @property
    def health_problem(self) -> str | None:
        """Why the engine cannot serve now (dead, not running, or stalled with work), or None."""
        if self._dead is not None:
            return f"engine loop died: {self.dead_reason}"
        if self._thread is None or not self._thread.is_alive():
            return "engine loop not running"
        since = self._busy_since
        if since is not None and (stalled := time.monotonic() - since) > self.stall_timeout:
            return (f"the engine step loop has not advanced for {stalled:.0f} s while it has work "
                    f"(--health-stall-timeout {self.stall_timeout:g})")
        return None

    @property
    def dead_reason(self) -> str | None:
        return None if self._dead is None else f"{type(self._dead).__name__}: {self._dead}"

    def begin_drain(self, drain_timeout: float) -> None:
        """Stop intake now and abort what still runs ``drain_timeout`` s from now (the first call's
        deadline holds); non-blocking and idempotent, safe from a signal handler."""
        with self._cond:
            self._accepting = False
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + max(0.0, drain_timeout)
            self._cond.notify_all()

    def shutdown(self, drain_timeout: float = 10.0, join_timeout: float = 30.0) -> None:
        """Stop intake, let in-flight requests finish for ``drain_timeout`` s, abort the rest, join."""
        self.begin_drain(drain_timeout)
        self._grammars.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(join_timeout)
        self._tokenizer_pool.shutdown()

    # ---- event-loop API ----------------------------------------------------------------------------
    def num_queued(self) -> int:
        """Requests submitted that have not produced an event yet (waiting or still in prefill)."""
        return len(self._queued)

    def submit(self, specs: Sequence[RequestSpec]) -> RequestGroup:
        """Queue requests as one group; call on the event loop. Raises EngineDead/StoppedError at once;
        a prompt that cannot be prepared rejects the group (``accepted()`` raises its ValueError)."""
        self._check_intake()
        tenant = specs[0].hints.tenant if specs else None
        group = RequestGroup([s.request_id for s in specs], tenant, asyncio.get_running_loop(), self._queued,
                             self.abort)
        self._queued.update(group.request_ids)
        task = asyncio.ensure_future(self._prepare_and_enqueue(group, specs))
        group.preparing = task
        self._preparing.add(task)
        task.add_done_callback(self._preparing.discard)
        return group

    async def _prepare_and_enqueue(self, group: RequestGroup, specs: Sequence[RequestSpec]) -> None:
        def prepare() -> list[EngineRequest]:
            return prepare_requests(self.engine, specs, self.max_request_tokens, self.share_prefix_cache)

        try:
            requests = await self._tokenizer_pool.run(group.tenant, prepare)
            self._enqueue(AddRequests(group, await self._with_grammars(group.tenant, requests)))
        except asyncio.CancelledError:  # the group was aborted (its client left) while being prepared
            reject(group, EngineStoppedError("the request was cancelled before it started"))
        except (PoolClosedError, GrammarCancelled):
            reject(group, EngineStoppedError("server is shutting down"))
        except Exception as exc:  # a bad prompt or grammar, or the engine stopped: the group is rejected
            reject(group, exc)

    async def _with_grammars(self, tenant: str | None, requests: list[EngineRequest]) -> tuple[EngineRequest, ...]:
        """The requests with their output constraints compiled, in ``tenant``'s turn."""
        specs = [r.structured for r in requests if r.structured is not None]
        grammars = await self._grammars.compile_all(tenant, specs)
        return tuple(r if r.structured is None else replace(r, grammar=grammars[r.structured]) for r in requests)

    def abort(self, request_ids: Sequence[str]) -> None:
        """Abort requests (thread-safe; unknown or finished ids are ignored)."""
        try:
            self._enqueue(AbortRequests(tuple(request_ids)), intake=False)
        except (EngineDeadError, EngineStoppedError):
            pass

    async def release_job(self, job_id: str) -> bool | None:
        """End the pin of ``job_id`` (the engine's, tenant-scoped id) on the engine thread: whether it held
        one, or None when the engine does not know the job (never seen, or already over)."""
        return await asyncio.wrap_future(self._ask(lambda future: ReleaseJob(job_id, future)))

    async def tokenize(self, fn: Callable[[EngineLike], T], tenant: str | None = None) -> T:
        """Run ``fn(engine)`` on the tokenizer pool in ``tenant``'s turn (work that only reads the tokenizer)."""
        self._check_intake(intake=False)
        try:
            return await self._tokenizer_pool.run(tenant, lambda: fn(self.engine))
        except PoolClosedError as exc:
            raise EngineStoppedError("server is shutting down") from exc

    async def stats(self) -> EngineStats:
        """A consistent ``engine.stats()`` snapshot taken on the engine thread."""
        return await asyncio.wrap_future(self._ask(TakeStats))

    def stats_sync(self, timeout: float = 30.0) -> EngineStats:
        """``stats`` for plain threads (tests, shutdown code)."""
        return self._ask(TakeStats).result(timeout)

    async def routing_stats(self) -> RoutingStats:
        """The engine's routing stats (``engine.routing_stats()``), taken on the engine thread."""
        return await asyncio.wrap_future(self._ask(TakeRoutingStats))

    async def has_unfinished_requests(self) -> bool:
        """Whether the engine has unfinished requests, asked on the engine thread."""
        return await asyncio.wrap_future(self._ask(CheckBusy))

    # ---- the command queue (any thread) ----------------------------------------------------------
    def _ask(self, question: Callable[[concurrent.futures.Future[T]], Question]) -> concurrent.futures.Future[T]:
        """Queue the question ``question(future)`` (a command class of ``engine_commands``); its answer
        arrives on the future."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._enqueue(question(future), intake=False)
        return future

    def _check_intake(self, intake: bool = True) -> None:
        if self._dead is not None:
            raise EngineDeadError(f"engine loop died: {self.dead_reason}")
        if intake and not self._accepting:
            raise EngineStoppedError("server is shutting down")
        if self._stopped.is_set():
            raise EngineStoppedError("engine loop has stopped")

    def _enqueue(self, cmd: Command, intake: bool = True) -> None:
        with self._cond:
            self._check_intake(intake)
            self._commands.append(cmd)
            self._cond.notify()

    def _next_commands(self) -> list[Command] | None:
        """Block until there is work; None means stop. Never spins while idle."""
        with self._cond:
            while True:
                if self._commands:
                    cmds = list(self._commands)
                    self._commands.clear()
                    return cmds
                busy = self.engine.has_unfinished_requests()
                if self._stop_deadline is not None:
                    if not busy or time.monotonic() >= self._stop_deadline:
                        # Closed under the lock: no command can slip in between now and the
                        # final abort, so no caller waits on a future nobody will resolve.
                        self._stopped.set()
                        return None
                    return []
                if busy:
                    return []
                timeout = self.idle_tick if self._pins_live() else None
                self._busy_since = None  # idle: nothing to advance
                woke = self._cond.wait(timeout)
                if not woke and timeout is not None and not self._commands:
                    return []  # one empty step: the scheduler sweeps expired pins

    def _pins_live(self) -> bool:
        with contextlib.suppress(Exception):
            return self.engine.holds_pins()
        return False

    # ---- the engine thread -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while (cmds := self._next_commands()) is not None:
                self._busy_since = time.monotonic()
                if self._stop_deadline is not None:  # draining: no compile is waited for (idempotent)
                    self._grammars.close()
                for cmd in cmds:
                    self._apply(cmd)
                outs = self.engine.step()
                if outs:
                    self._dispatch(outs)
            self._grammars.close()
            self._abort_all("server shutting down")
            release_and_account(self.engine)
        except BaseException as exc:  # the loop must report its death, whatever killed it
            logger.exception("engine loop died")
            self._die(exc)
        finally:
            self._stopped.set()

    def _apply(self, cmd: Command) -> None:
        match cmd:
            case AddRequests(group, requests):
                self._add_group(group, requests)
            case AbortRequests(request_ids):
                self._abort_ids(request_ids)
            case ReleaseJob(job_id, future):
                resolve(future, lambda: self._release(job_id))
            case TakeStats(future):
                resolve(future, self.engine.stats)
            case TakeRoutingStats(future):
                resolve(future, self.engine.routing_stats)
            case CheckBusy(future):
                resolve(future, self.engine.has_unfinished_requests)

    def _add_group(self, group: RequestGroup, requests: tuple[EngineRequest, ...]) -> None:
        added: list[str] = []
        try:
            for request in requests:
                self.engine.add_request(request)
                added.append(request.request_id)
        except Exception as exc:  # validation error: nothing of the group runs
            if added:
                self.engine.abort(added)
            reject(group, exc)
            return
        self._live.accept(group, added)

    def _release(self, job_id: str) -> bool | None:
        if not self.engine.knows_job(job_id):
            return None
        return bool(self.engine.release_job(job_id))

    def _abort_ids(self, ids: Sequence[str]) -> None:
        live = [rid for rid in ids if rid in self._live]
        if not live:
            return
        self.engine.abort(live)
        for rid in live:
            self._notify_listeners(self.abort_listeners, "abort", rid, self._live.tenant_of(rid))
            self._live.end_aborted(rid)

    def _abort_all(self, reason: str) -> None:
        ids = self._live.ids()
        if ids:
            logger.info("aborting %d in-flight requests: %s", len(ids), reason)
            self._abort_ids(ids)

    def _dispatch(self, outs: list[RequestOutput]) -> None:
        now = time.monotonic()
        for out in outs:
            self._notify_listeners(self.output_listeners, "output", out, now)
        self._live.deliver(outs)

    @staticmethod
    def _notify_listeners(listeners: list[Callable[..., None]], kind: str, *args: object) -> None:
        for fn in listeners:
            try:
                fn(*args)
            except Exception:
                logger.exception("%s listener failed", kind)

    def _die(self, exc: BaseException) -> None:
        with self._cond:
            self._dead = exc
            cmds = list(self._commands)
            self._commands.clear()
        err = EngineDeadError(f"engine loop died: {type(exc).__name__}: {exc}")
        for cmd in cmds:
            match cmd:
                case AddRequests(group=group):
                    reject(group, err)
                case ReleaseJob() | TakeStats() | TakeRoutingStats() | CheckBusy():
                    fail(cmd, err)
                case AbortRequests():
                    pass
        self._live.fail_all(err)


def prepare_requests(engine: EngineLike, specs: Sequence[RequestSpec], max_total_tokens: int | None = None,
                     share_prefix_cache: bool = False) -> list[EngineRequest]:
    """The engine's messages for ``specs``: a rendered prompt tokenized and checked, ``fill_max_tokens``
    resolved, the output constraint set, the hints scoped to the tenant. Runs on the tokenizer pool;
    reads only the engine's tokenizer and limits. Raises ValueError for a bad prompt, or once the
    prompts and ``max_tokens`` so far pass ``max_total_tokens`` (the rest is not tokenized)."""
    ready, total = [], 0
    for spec in specs:
        request = _prepare(engine, spec, share_prefix_cache)
        total += len(request.prompt_token_ids) + request.params.max_tokens
        if max_total_tokens is not None and total > max_total_tokens:
            raise ValueError(f"the request's prompts and max_tokens come to more than {max_total_tokens} "
                             f"tokens (--max-request-tokens)")
        ready.append(request)
    return ready


def _prepare(engine: EngineLike, spec: RequestSpec, share_prefix_cache: bool) -> EngineRequest:
    prompt = spec.prompt(engine) if callable(spec.prompt) else spec.prompt
    text, ids = engine.tokenize_prompt(prompt)
    params = spec.params
    structured = spec.constraint() if spec.constraint is not None else None
    if structured is not None:
        params = replace(params, structured=structured)
    if spec.fill_max_tokens:
        room = engine.max_model_len - len(ids)
        if room < 1:
            raise ValueError(f"prompt ({len(ids)} tokens) leaves no room under max_model_len "
                             f"({engine.max_model_len})")
        params = replace(params, max_tokens=max(room, params.min_tokens))
    tool_reader = spec.tool_reader() if spec.tool_reader is not None else None
    return EngineRequest(spec.request_id, tuple(ids), text, params, spec.hints.scoped(share_prefix_cache),
                         tool_reader=tool_reader)
