"""A group's output constraints compiled before it reaches the engine thread, fairly between tenants.

A constraint's compile cost is known only once it ran (n optional JSON properties cost O(n^2)), so two
tenants (or one client with two API keys: each key is a tenant) sending large schemas could hold every
compile worker for a whole budget each, and a third tenant's two-property schema would wait behind
them. So constraints go by their expected cost, on two lanes:

- A cached constraint (``EngineLike.cached_grammar``) waits for no lane: it is answered on the event loop.
- The fast lane (one pool thread, one worker process at a higher priority than the main lane's) takes
  constraints expected to be cheap: ``expected_cost`` (a count of the schema's JSON values, or the
  text's length, computed without the grammar library) at most ``FAST_LANE_MAX_COST``, and not known
  to be slow. Its trial compile has ``GrammarLimits.fast_timeout_s``; one that runs out of it
  (``FastLaneExceeded``) was misjudged: it is remembered as slow and queued on the main lane with the
  whole budget. So a large constraint holds the fast lane for at most that budget, and a small one
  waits there only for other tenants' small ones (round robin, one each), never for a large one.
- The main lane (``limits.workers`` threads and processes) takes the rest, within ``limits.timeout_s``.

Invariants:
- On each lane's pool (``FairTokenizerPool``) a tenant uses at most all but one thread (the fast lane:
  its one thread, round robin between tenants); each compile runs within ``grammar_limits``
  (``LLMEngine.compile_grammar``: a trial compile in a worker process that is killed past its budget).
  Each distinct constraint of a group is compiled once. ``compile_all`` returns only with every
  grammar ready, so the step loop never compiles; a refused constraint raises (its ``GrammarRefused``
  is the client's 400).
- Cancelling ``compile_all`` (its group was aborted) cancels its running compile (a trial compile's
  worker process is killed). ``close`` (idempotent) refuses new, queued and running compiles at once
  (``PoolClosedError``: their callers are answered now, nobody waits for a compile) and cancels every
  running one (its worker process is killed).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable

from agent_engine.engine.grammar_build import TOO_SLOW, GrammarRefused, ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.grammar_workers import FastLaneExceeded
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.tokenizer_pool import FairTokenizerPool, PoolClosedError
from scheduler import StructuredSpec

# About 160 optional properties (0.4 s to compile on the 4k-token default vocabulary, quiet 2 cores), an
# agent's tool set with long descriptions (descriptions count once, not by length), a 3 KB regex.
FAST_LANE_MAX_COST = 400
PARSE_LIMIT_CHARS = 64 * 1024  # a longer constraint is not parsed to be estimated: it goes to the main lane
KNOWN_SLOW_MAX = 4096  # constraints remembered as slow (by hash)


def expected_cost(spec: StructuredSpec) -> int:
    """A cheap estimate of what compiling ``spec`` costs, in rough grammar-element units: for a JSON
    schema or structural tag, the number of JSON values in it plus one per 64 characters; for a choice,
    its options plus one per 8 characters; for a regex or grammar, one per 8 characters."""
    text = spec.value if isinstance(spec.value, str) else "\n".join(spec.value)
    if len(text) > PARSE_LIMIT_CHARS:
        return len(text)
    if spec.kind in ("json", "structural_tag"):
        return _json_values(text) + len(text) // 64
    if spec.kind == "choice":
        return len(spec.value) + len(text) // 8
    return len(text) // 8


def _json_values(text: str) -> int:
    try:
        todo = [json.loads(text)]
    except ValueError:
        return len(text)
    count = 0
    while todo:
        value = todo.pop()
        count += 1
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return count


class GrammarCompiles:
    """The two fair lanes that compile output constraints, and the cancel flags of the compiles they run."""

    def __init__(self, engine: EngineLike, limits: GrammarLimits) -> None:
        self.engine = engine
        self.limits = limits
        self.pool = FairTokenizerPool(limits.workers, name="grammar")
        self.fast_pool = FairTokenizerPool(1, name="grammar-fast")
        self._running: set[threading.Event] = set()  # cancel flags of running compiles
        self._slow: OrderedDict[int, None] = OrderedDict()  # hashes of constraints known to be slow
        self._closed = False
        self._lock = threading.Lock()

    async def compile_all(self, tenant: str | None, specs: Iterable[StructuredSpec]) -> dict[StructuredSpec, ReadyGrammar]:
        """Each distinct constraint of ``specs`` compiled once, in ``tenant``'s turn on its lane."""
        compiled: dict[StructuredSpec, ReadyGrammar] = {}
        for spec in specs:
            if spec not in compiled:
                compiled[spec] = await self._compile_one(tenant, spec)
        return compiled

    def fast(self, spec: StructuredSpec) -> bool:
        """Whether ``spec`` goes to the fast lane (expected cheap, not known to be slow)."""
        with self._lock:
            if hash(spec) in self._slow:
                return False
        return expected_cost(spec) <= FAST_LANE_MAX_COST

    def close(self) -> None:
        """Refuse new compiles, answer queued and running ones (``PoolClosedError``) now, and cancel the
        running ones (their worker processes are killed; nobody waits for them). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._running)
        self.pool.shutdown(abandon_running=True)
        self.fast_pool.shutdown(abandon_running=True)
        for cancel in running:
            cancel.set()

    async def _compile_one(self, tenant: str | None, spec: StructuredSpec) -> ReadyGrammar:
        if self._closed:
            raise PoolClosedError("the grammar pool is shut down")
        ready = self.engine.cached_grammar(spec)
        if ready is not None:
            return ready
        if self.fast(spec):
            try:
                return await self._run(self.fast_pool, tenant, spec, fast=True)
            except FastLaneExceeded:
                self._remember_slow(spec)
        try:
            return await self._run(self.pool, tenant, spec, fast=False)
        except GrammarRefused as exc:
            if exc.code == TOO_SLOW:
                self._remember_slow(spec)
            raise

    async def _run(self, pool: FairTokenizerPool, tenant: str | None, spec: StructuredSpec, fast: bool) -> ReadyGrammar:
        cancel = threading.Event()
        with self._lock:
            if self._closed:
                raise PoolClosedError("the grammar pool is shut down")
            self._running.add(cancel)
        try:
            return await pool.run(tenant, lambda: self.engine.compile_grammar(spec, self.limits, cancel, fast=fast))
        except asyncio.CancelledError:
            cancel.set()  # the worker trying this grammar is killed
            raise
        finally:
            with self._lock:
                self._running.discard(cancel)

    def _remember_slow(self, spec: StructuredSpec) -> None:
        with self._lock:
            self._slow[hash(spec)] = None
            self._slow.move_to_end(hash(spec))
            while len(self._slow) > KNOWN_SLOW_MAX:
                self._slow.popitem(last=False)
