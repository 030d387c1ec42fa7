"""A group's output constraints compiled before it reaches the engine thread.

Invariants:
- Compiles run on a pool shared fairly by tenants (``grammar_workers`` threads, one tenant using at
  most all but one), each within ``grammar_limits`` (``LLMEngine.compile_grammar``: a trial compile in
  a worker process that is killed past the budget). Each distinct constraint of a group is compiled
  once. ``compile_all`` returns only with every grammar ready, so the step loop never compiles; a
  refused constraint raises (its ``GrammarRefused`` is the client's 400).
- Cancelling ``compile_all`` (its group was aborted) cancels its running compile (a trial compile's
  worker process is killed); ``close`` refuses new and queued compiles (``PoolClosedError``) and
  cancels every running one (``GrammarCancelled``), waiting for none.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.tokenizer_pool import FairTokenizerPool
from scheduler import StructuredSpec


class GrammarCompiles:
    """The fair pool that compiles output constraints, and the cancel flags of the compiles it runs."""

    def __init__(self, engine: EngineLike, limits: GrammarLimits) -> None:
        self.engine = engine
        self.limits = limits
        self.pool = FairTokenizerPool(limits.workers, name="grammar")
        self._running: set[threading.Event] = set()  # cancel flags of running compiles
        self._lock = threading.Lock()

    async def compile_all(self, tenant: str | None, specs: Iterable[StructuredSpec]) -> dict[StructuredSpec, ReadyGrammar]:
        """Each distinct constraint of ``specs`` compiled once, in ``tenant``'s turn on the pool."""
        compiled: dict[StructuredSpec, ReadyGrammar] = {}
        for spec in specs:
            if spec not in compiled:
                compiled[spec] = await self._compile_one(tenant, spec)
        return compiled

    def close(self) -> None:
        """Refuse new compiles and cancel the running ones (nobody waits for them)."""
        self.pool.shutdown()
        with self._lock:
            running = list(self._running)
        for cancel in running:
            cancel.set()

    async def _compile_one(self, tenant: str | None, spec: StructuredSpec) -> ReadyGrammar:
        cancel = threading.Event()
        with self._lock:
            self._running.add(cancel)
        try:
            return await self.pool.run(tenant, lambda: self.engine.compile_grammar(spec, self.limits, cancel))
        except asyncio.CancelledError:
            cancel.set()  # the worker trying this grammar is killed
            raise
        finally:
            with self._lock:
                self._running.discard(cancel)
