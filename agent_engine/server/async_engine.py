"""``AsyncEngine``: one ``LLMEngine`` driven by one background thread, fed from asyncio.

Invariants:
- Exactly one thread (the engine thread started by ``start``) ever touches the ``LLMEngine``:
  submissions, aborts, job releases and ad-hoc calls (``call``/``call_sync``, e.g. a stats snapshot) are
  commands on a lock-protected queue that the engine thread drains before each step.
- The engine thread never busy-spins: with no commands and no unfinished requests it blocks on a
  condition variable (waking every ``idle_tick`` seconds only while pins are live, so their TTLs expire).
- Every submitted request ends with exactly one terminal event on its group's asyncio queue: a
  finished ``RequestOutput``, an abort, or an error (the engine failed the step, or the loop died).
- If the engine thread dies, ``healthy`` turns False, every pending request and call fails with
  ``EngineDeadError`` and later submissions fail at once.
- ``shutdown`` stops intake, lets running requests finish until a deadline, aborts the rest, then joins.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from agent_engine.engine.outputs import RequestOutput
from scheduler import SamplingParams

logger = logging.getLogger(__name__)

OutputListener = Callable[[RequestOutput, float], None]
AbortListener = Callable[[str], None]


class EngineDeadError(RuntimeError):
    """The engine loop has died; nothing can be served any more."""


class EngineStoppedError(RuntimeError):
    """The engine is shutting down and accepts no new requests."""


@dataclass
class RequestSpec:
    """One request to add. ``prompt`` may be a callable run on the engine thread (e.g. a chat template).

    With ``fill_max_tokens`` the prompt is tokenized first and ``max_tokens`` becomes
    ``max_model_len - prompt_len`` (vLLM's behaviour when a client leaves max_tokens unset).
    """

    request_id: str
    prompt: Any
    params: SamplingParams
    fill_max_tokens: bool = False
    priority: int = 0
    cache_salt: str | None = None
    job_id: str | None = None
    is_last_step: bool = False
    tool_name: str | None = None
    tool_ttl_hint: float | None = None


@dataclass
class GroupEvent:
    """One event of one request of a group: an output, an abort (output None) or an error."""

    index: int
    request_id: str
    output: RequestOutput | None
    error: BaseException | None = None
    finished: bool = False


class RequestGroup:
    """Requests submitted together (one per prompt) sharing one asyncio queue; used on the event loop.

    ``accepted()`` raises the engine's validation error (ValueError etc.) if any request was rejected;
    then none of them runs. ``events()`` yields until every request has had its terminal event.
    """

    def __init__(self, owner: AsyncEngine, specs: list[RequestSpec], loop: asyncio.AbstractEventLoop) -> None:
        self.request_ids = [s.request_id for s in specs]
        self._owner = owner
        self._loop = loop
        self._queue: asyncio.Queue[GroupEvent] = asyncio.Queue()
        self._accepted: asyncio.Future[None] = loop.create_future()
        self._open = set(self.request_ids)

    # -- called on the event loop (posted from the engine thread) --
    def _on_accepted(self, err: BaseException | None) -> None:
        if self._accepted.done():
            return
        if err is None:
            self._accepted.set_result(None)
        else:
            self._accepted.set_exception(err)
            for rid in self.request_ids:
                self._owner._unstarted.discard(rid)

    def _on_event(self, ev: GroupEvent) -> None:
        self._owner._unstarted.discard(ev.request_id)
        self._queue.put_nowait(ev)

    # -- consumer API --
    async def accepted(self) -> None:
        """Wait until the engine thread queued the requests; raises what ``add_request`` raised."""
        await self._accepted

    async def events(self) -> AsyncIterator[GroupEvent]:
        await self._accepted
        while self._open:
            ev = await self._queue.get()
            if ev.finished:
                self._open.discard(ev.request_id)
            yield ev

    @property
    def done(self) -> bool:
        return not self._open

    def abort(self) -> None:
        """Abort every request of the group that has not ended (harmless if all ended)."""
        if self._open:
            self._owner.abort(list(self._open))


class AsyncEngine:
    """Owns the engine thread. Construct, ``start()``, then submit from an asyncio event loop."""

    def __init__(self, engine: Any, *, idle_tick: float = 0.5) -> None:
        self.engine = engine
        self.idle_tick = idle_tick
        self.output_listeners: list[OutputListener] = []
        self.abort_listeners: list[AbortListener] = []
        self._cond = threading.Condition()
        self._commands: deque[tuple[Any, ...]] = deque()
        self._thread: threading.Thread | None = None
        self._dead: BaseException | None = None
        self._accepting = True
        self._stop_deadline: float | None = None
        self._stopped = threading.Event()
        # Engine-thread only: live request id -> (group, index).
        self._live: dict[str, tuple[RequestGroup, int]] = {}
        # Event-loop only: submitted requests that have not produced any event yet (queued).
        self._unstarted: set[str] = set()
        self.num_steps = 0

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> AsyncEngine:
        """Start the engine thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
            self._thread.start()
        return self

    @property
    def healthy(self) -> bool:
        return self._dead is None and self._thread is not None and self._thread.is_alive()

    @property
    def dead_reason(self) -> str | None:
        return None if self._dead is None else f"{type(self._dead).__name__}: {self._dead}"

    def shutdown(self, drain_timeout: float = 10.0, join_timeout: float = 30.0) -> None:
        """Stop intake, let in-flight requests finish for ``drain_timeout`` s, abort the rest, join."""
        with self._cond:
            self._accepting = False
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + max(0.0, drain_timeout)
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(join_timeout)

    # ---- event-loop API ----------------------------------------------------------------------------
    def num_queued(self) -> int:
        """Requests submitted that have not produced an event yet (waiting or still in prefill)."""
        return len(self._unstarted)

    def submit(self, specs: list[RequestSpec]) -> RequestGroup:
        """Queue requests as one group; call on the event loop. Raises EngineDead/StoppedError at once."""
        group = RequestGroup(self, specs, asyncio.get_running_loop())
        self._enqueue(("add", group, specs))
        self._unstarted.update(group.request_ids)
        return group

    def abort(self, request_ids: list[str]) -> None:
        """Abort requests (thread-safe; unknown or finished ids are ignored)."""
        try:
            self._enqueue(("abort", list(request_ids)), intake=False)
        except (EngineDeadError, EngineStoppedError):
            pass

    async def call(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(engine)`` on the engine thread and return its result (or raise its exception)."""
        return await asyncio.wrap_future(self._call_future(fn))

    def call_sync(self, fn: Callable[[Any], Any], timeout: float = 30.0) -> Any:
        """``call`` for plain threads (tests, shutdown code)."""
        return self._call_future(fn).result(timeout)

    async def release_job(self, job_id: str) -> bool:
        return bool(await self.call(lambda eng: eng.release_job(job_id)))

    async def stats(self) -> dict[str, Any]:
        """A consistent ``engine.stats()`` snapshot taken on the engine thread."""
        return dict(await self.call(lambda eng: eng.stats()))

    # ---- internals: submission side -------------------------------------------------------------
    def _call_future(self, fn: Callable[[Any], Any]) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._enqueue(("call", fn, fut), intake=False)
        return fut

    def _enqueue(self, cmd: tuple[Any, ...], intake: bool = True) -> None:
        with self._cond:
            if self._dead is not None:
                raise EngineDeadError(f"engine loop died: {self.dead_reason}")
            if intake and not self._accepting:
                raise EngineStoppedError("server is shutting down")
            if self._stopped.is_set():
                raise EngineStoppedError("engine loop has stopped")
            self._commands.append(cmd)
            self._cond.notify()

    # ---- internals: the engine thread -----------------------------------------------------------
    def _run(self) -> None:
        eng = self.engine
        try:
            while True:
                cmds = self._next_commands()
                if cmds is None:
                    break
                for cmd in cmds:
                    self._apply(cmd)
                outs = eng.step()
                self.num_steps += 1
                if outs:
                    self._dispatch(outs)
            self._abort_all("server shutting down")
        except BaseException as exc:  # the loop must report its death, whatever killed it
            logger.exception("engine loop died")
            self._die(exc)
        finally:
            self._stopped.set()

    def _next_commands(self) -> list[tuple[Any, ...]] | None:
        """Block until there is work; None means stop. Never spins while idle."""
        eng = self.engine
        with self._cond:
            while True:
                if self._commands:
                    cmds = list(self._commands)
                    self._commands.clear()
                    return cmds
                busy = eng.has_unfinished_requests()
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
                woke = self._cond.wait(timeout)
                if not woke and timeout is not None and not self._commands:
                    return []  # one empty step: the scheduler sweeps expired pins

    def _pins_live(self) -> bool:
        try:
            return bool(self.engine.stats().get("num_pinned_jobs", 0))
        except Exception:
            return False

    def _apply(self, cmd: tuple[Any, ...]) -> None:
        kind = cmd[0]
        if kind == "add":
            self._add_group(cmd[1], cmd[2])
        elif kind == "abort":
            self._abort_ids(cmd[1])
        elif kind == "call":
            fn, fut = cmd[1], cmd[2]
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(fn(self.engine))
            except BaseException as exc:  # delivered to the caller, the loop goes on
                fut.set_exception(exc)

    def _add_group(self, group: RequestGroup, specs: list[RequestSpec]) -> None:
        added: list[str] = []
        try:
            for spec in specs:
                self._add_one(spec)
                added.append(spec.request_id)
        except Exception as exc:  # validation error: nothing of the group runs
            if added:
                self.engine.abort(added)
            self._post(group, group._on_accepted, exc)
            return
        for i, rid in enumerate(added):
            self._live[rid] = (group, i)
        self._post(group, group._on_accepted, None)

    def _add_one(self, spec: RequestSpec) -> None:
        eng = self.engine
        prompt = spec.prompt(eng) if callable(spec.prompt) else spec.prompt
        params = spec.params
        if spec.fill_max_tokens:
            _, ids = eng.tokenize_prompt(prompt)
            room = eng.max_model_len - len(ids)
            if room < 1:
                raise ValueError(f"prompt ({len(ids)} tokens) leaves no room under max_model_len "
                                 f"({eng.max_model_len})")
            params = replace(params, max_tokens=max(room, params.min_tokens))
            prompt = ids
        eng.add_request(spec.request_id, prompt, params, priority=spec.priority, cache_salt=spec.cache_salt,
                        job_id=spec.job_id, is_last_step=spec.is_last_step, tool_name=spec.tool_name,
                        tool_ttl_hint=spec.tool_ttl_hint)

    def _abort_ids(self, ids: list[str]) -> None:
        live = [rid for rid in ids if rid in self._live]
        if not live:
            return
        self.engine.abort(live)
        for rid in live:
            group, idx = self._live.pop(rid)
            self._notify_abort(rid)
            self._post(group, group._on_event, GroupEvent(idx, rid, None, finished=True))

    def _abort_all(self, reason: str) -> None:
        ids = list(self._live)
        if ids:
            logger.info("aborting %d in-flight requests: %s", len(ids), reason)
            self._abort_ids(ids)

    def _dispatch(self, outs: list[RequestOutput]) -> None:
        now = time.monotonic()
        for out in outs:
            for fn in self.output_listeners:
                try:
                    fn(out, now)
                except Exception:
                    logger.exception("output listener failed")
            entry = self._live.get(out.request_id)
            if entry is None:
                continue
            if out.finished:
                del self._live[out.request_id]
            group, idx = entry
            self._post(group, group._on_event, GroupEvent(idx, out.request_id, out, finished=out.finished))

    def _notify_abort(self, rid: str) -> None:
        for fn in self.abort_listeners:
            try:
                fn(rid)
            except Exception:
                logger.exception("abort listener failed")

    def _die(self, exc: BaseException) -> None:
        with self._cond:
            self._dead = exc
            cmds = list(self._commands)
            self._commands.clear()
        err = EngineDeadError(f"engine loop died: {type(exc).__name__}: {exc}")
        for cmd in cmds:
            if cmd[0] == "add":
                self._post(cmd[1], cmd[1]._on_accepted, err)
            elif cmd[0] == "call" and cmd[2].set_running_or_notify_cancel():
                cmd[2].set_exception(err)
        for rid, (group, idx) in list(self._live.items()):
            self._post(group, group._on_event, GroupEvent(idx, rid, None, error=err, finished=True))
        self._live.clear()

    @staticmethod
    def _post(group: RequestGroup, fn: Callable[..., None], *args: Any) -> None:
        try:
            group._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            pass
