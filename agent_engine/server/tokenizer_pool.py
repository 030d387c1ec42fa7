"""``FairTokenizerPool``: the threads that render and tokenize prompts, shared fairly between tenants.

Rendering a chat template and tokenizing a long prompt take real time (a megabyte of text is seconds),
and they must run off both the event loop and the engine thread. One shared thread would let one
tenant's huge prompt stall every other tenant's two-token chat; this pool bounds that. The server runs
two more (``grammar_compiles``: a main and a fast lane) for compiling output constraints, for the same reason.

Invariants:
- ``workers`` threads run jobs; a tenant runs at most ``per_tenant`` jobs at once (``workers - 1``, at
  least 1), so with two or more workers one thread is always free of any single tenant's work.
- Each tenant's jobs run in submission order (FIFO per tenant; with ``per_tenant == 1`` one at a
  time, so a tenant's request groups reach the engine in the order they were submitted); across
  tenants the next job is that of the tenant served least recently among those with work and room
  (round robin, where a tenant that just arrived goes before one that was just served: a job waits
  for at most one job of each other tenant to start before it).
- Every submitted job ends exactly once: with its result, its exception, or ``PoolClosedError`` when
  the pool shuts down before it ran (or, with ``shutdown(abandon_running=True)``, before it finished:
  its caller is answered at once and what the job returns later is dropped). ``shutdown`` never waits
  for a running job.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
MAX_REMEMBERED_TENANTS = 4096  # when each tenant was last served, for this many tenants

__all__ = ["FairTokenizerPool", "PoolClosedError"]


class PoolClosedError(RuntimeError):
    """The pool was shut down before the job ran."""


@dataclass
class _Job:
    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class FairTokenizerPool:
    """Per-tenant FIFO queues served round-robin by ``workers`` threads (see the module docstring)."""

    def __init__(self, workers: int = 2, name: str = "tokenizer") -> None:
        if workers < 1:
            raise ValueError("the tokenizer pool needs at least one worker")
        self.workers = workers
        self.per_tenant = max(1, workers - 1)
        self._cond = threading.Condition()
        self._queues: OrderedDict[str | None, deque[_Job]] = OrderedDict()  # arrival order breaks ties
        self._served: OrderedDict[str | None, int] = OrderedDict()  # tenant -> when last served (a count)
        self._serves = 0
        self._running: dict[str | None, int] = {}
        self._running_jobs: dict[int, _Job] = {}  # id(job) -> job, for ``shutdown(abandon_running=True)``
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    async def run(self, tenant: str | None, fn: Callable[[], T]) -> T:
        """Run ``fn()`` on a worker in ``tenant``'s turn; its result or exception comes back here."""
        loop = asyncio.get_running_loop()
        job = _Job(fn, loop, loop.create_future())
        with self._cond:
            if self._closed:
                raise PoolClosedError("the tokenizer pool is shut down")
            self._queues.setdefault(tenant, deque()).append(job)
            self._cond.notify()
        return await job.future

    def pending(self, tenant: str | None) -> int:
        """Jobs of ``tenant`` queued or running now."""
        with self._cond:
            return len(self._queues.get(tenant, ())) + self._running.get(tenant, 0)

    def shutdown(self, abandon_running: bool = False) -> None:
        """Fail every queued job with ``PoolClosedError`` (and every running one too with
        ``abandon_running``); workers exit after their current job."""
        with self._cond:
            self._closed = True
            dropped = [job for queue in self._queues.values() for job in queue]
            if abandon_running:
                dropped += self._running_jobs.values()
            self._queues.clear()
            self._cond.notify_all()
        for job in dropped:
            _settle(job, None, PoolClosedError("the tokenizer pool is shut down"))

    def _work(self) -> None:
        while True:
            with self._cond:
                picked = self._next_job()
                while picked is None and not self._closed:
                    self._cond.wait()
                    picked = self._next_job()
                if picked is None:
                    return
                tenant, job = picked
                if job.future.cancelled():  # its caller went away while it waited
                    continue
                self._running[tenant] = self._running.get(tenant, 0) + 1
                self._running_jobs[id(job)] = job
            try:
                result, error = job.fn(), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            _settle(job, result, error)
            with self._cond:
                del self._running_jobs[id(job)]
                self._running[tenant] -= 1
                if not self._running[tenant]:
                    del self._running[tenant]
                self._cond.notify()

    def _next_job(self) -> tuple[str | None, _Job] | None:
        """The next job of the tenant with work and room served least recently (see the module docstring)."""
        ready = [t for t in self._queues if self._running.get(t, 0) < self.per_tenant]
        if not ready:
            return None
        tenant = min(ready, key=lambda t: self._served.get(t, -1))
        queue = self._queues[tenant]
        job = queue.popleft()
        if not queue:
            del self._queues[tenant]
        self._serves += 1
        self._served[tenant] = self._serves
        self._served.move_to_end(tenant)
        while len(self._served) > MAX_REMEMBERED_TENANTS:
            self._served.popitem(last=False)
        return tenant, job


def _settle(job: _Job, result: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if job.future.done():
            return
        if error is None:
            job.future.set_result(result)
        else:
            job.future.set_exception(error)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the event loop is closed: nobody awaits the job any more
        pass
