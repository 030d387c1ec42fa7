"""Per-request bookkeeping between the event loop and the engine thread: request groups, their events,
and the engine thread's live table.

Invariants:
- A ``RequestGroup`` belongs to one event loop. Only callbacks that the engine thread posts to that loop
  (``post``) touch its acceptance future and its event queue; consumers await ``accepted`` / ``events``.
- ``LiveRequests`` is touched by the engine thread only. It maps each accepted, unfinished request id to
  its group and index, and drops an id exactly when it posts that request's terminal event (the finished
  output, an abort or an error), so every accepted request gets exactly one terminal event.
- The ``queued`` set a group is given (request ids submitted that have produced no event yet) is
  event-loop only: ids enter it on submit and leave it on their first event or on rejection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from agent_engine.engine.outputs import RequestOutput

AbortFn = Callable[[list[str]], None]


class EngineDeadError(RuntimeError):
    """The engine loop has died; nothing can be served any more."""


class EngineStoppedError(RuntimeError):
    """The engine is shutting down and accepts no new requests."""


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

    def __init__(self, request_ids: list[str], tenant: str | None, loop: asyncio.AbstractEventLoop,
                 queued: set[str], abort: AbortFn) -> None:
        self.request_ids = list(request_ids)
        self.tenant = tenant
        self.loop = loop
        self._queued = queued
        self._abort = abort
        self._queue: asyncio.Queue[GroupEvent] = asyncio.Queue()
        self._accepted: asyncio.Future[None] = loop.create_future()
        self._open = set(self.request_ids)
        # Called on the event loop with how many of the group's requests just ended (finished, aborted,
        # failed or rejected): once per request in all (the server's per-tenant in-flight count).
        self.on_end: Callable[[int], None] | None = None
        # The task preparing the group (prompts, grammars) until it is handed to the engine thread.
        self.preparing: asyncio.Future[None] | None = None

    # -- event-loop callbacks, posted by the engine thread --
    def on_accepted(self, err: BaseException | None) -> None:
        if self._accepted.done():
            return
        if err is None:
            self._accepted.set_result(None)
            return
        self._accepted.set_exception(err)
        self._queued.difference_update(self.request_ids)
        self._ended(len(self.request_ids))

    def on_event(self, ev: GroupEvent) -> None:
        self._queued.discard(ev.request_id)
        self._queue.put_nowait(ev)
        if ev.finished:
            self._ended(1)

    def _ended(self, n: int) -> None:
        if self.on_end is not None:
            self.on_end(n)

    # -- consumer API --
    async def accepted(self) -> None:
        """Wait until the engine thread queued the requests; raises what ``add_request`` raised."""
        await self._accepted

    @property
    def acceptance(self) -> asyncio.Future[None]:
        """The future ``accepted`` waits on (to wait for it beside something else; never cancel it)."""
        return self._accepted

    async def events(self) -> AsyncIterator[GroupEvent]:
        await self._accepted
        while self._open:
            ev = await self._queue.get()
            if ev.finished:
                self._open.discard(ev.request_id)
            yield ev

    def abort(self) -> None:
        """Abort every request of the group that has not ended (harmless if all ended); a group still
        being prepared stops there (its grammar compile is cancelled) and is rejected."""
        if self.preparing is not None and not self.preparing.done():
            self.preparing.cancel()
        if self._open:
            self._abort(list(self._open))


def post(group: RequestGroup, fn: Callable[..., None], *args: object) -> None:
    """Run ``fn(*args)`` on the group's event loop (thread-safe); dropped if that loop is closed."""
    _post_on(group.loop, fn, *args)


def _post_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: object) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the event loop is closed: nobody is listening any more
        pass


def _on_events(batch: list[tuple[RequestGroup, GroupEvent]]) -> None:
    """On the event loop: one step's events, in the engine's order."""
    for group, ev in batch:
        group.on_event(ev)


def reject(group: RequestGroup, err: BaseException) -> None:
    """Fail the group's acceptance with ``err`` (none of its requests runs)."""
    post(group, group.on_accepted, err)


class LiveRequests:
    """Engine-thread only: accepted, unfinished request id -> (group, index in the group)."""

    def __init__(self) -> None:
        self._live: dict[str, tuple[RequestGroup, int]] = {}

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._live

    def ids(self) -> list[str]:
        return list(self._live)

    def tenant_of(self, request_id: str) -> str | None:
        entry = self._live.get(request_id)
        return entry[0].tenant if entry is not None else None

    def accept(self, group: RequestGroup, request_ids: list[str]) -> None:
        """Track the group's requests (all were added to the engine) and resolve its acceptance."""
        for i, rid in enumerate(request_ids):
            self._live[rid] = (group, i)
        post(group, group.on_accepted, None)

    def deliver(self, outs: list[RequestOutput]) -> None:
        """Post each output to its group (untracked ids are ignored; a finished output ends its
        request): one hand-off per event loop per step, not one per output (each hand-off wakes the
        loop through its self-pipe)."""
        batches: dict[asyncio.AbstractEventLoop, list[tuple[RequestGroup, GroupEvent]]] = {}
        live = self._live
        for out in outs:
            entry = live.get(out.request_id)
            if entry is None:
                continue
            if out.finished:
                del live[out.request_id]
            group, idx = entry
            batches.setdefault(group.loop, []).append(
                (group, GroupEvent(idx, out.request_id, out, finished=out.finished)))
        for loop, batch in batches.items():
            _post_on(loop, _on_events, batch)

    def end_aborted(self, request_id: str) -> None:
        """Post the abort event of a tracked request and stop tracking it."""
        group, idx = self._live.pop(request_id)
        post(group, group.on_event, GroupEvent(idx, request_id, None, finished=True))

    def fail_all(self, err: BaseException) -> None:
        """Post ``err`` as the terminal event of every tracked request and forget them all."""
        for rid, (group, idx) in list(self._live.items()):
            post(group, group.on_event, GroupEvent(idx, rid, None, error=err, finished=True))
        self._live.clear()
