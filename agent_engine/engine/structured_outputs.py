"""Structured outputs in the engine: compiled grammars, one matcher per request, the step's bitmask.

The library is xgrammar (``GrammarCompiler`` / ``GrammarMatcher``); it is imported on the first
constrained request, so an engine that never sees one pays nothing (no import, no tokenizer scan).

Lifecycle (driven by ``LLMEngine``):

* ``compile_checked(spec, limits, cancel, fast)`` (the server's grammar pool, never the step loop) returns
  a ``ReadyGrammar``: from the cache, or tried first in a worker process of the main or the fast lane
  under ``limits`` (``grammar_workers``: killed past the time budget or on ``cancel``) and then compiled
  here. ``cached(spec)`` is the cache alone (any thread; the server's fast path for a known grammar).
* ``add(request_id, params, ready)`` at intake creates the request's matcher from ``ready`` (the
  server always passes one, so the step loop never compiles); without it ``params.structured`` is
  prepared and compiled inline (offline use: ``LLM.generate``), with the size cap and the emptiness
  check but no time budget. Compiled grammars live in an LRU cache of ``cache_size`` per manager,
  i.e. per tokenizer, keyed by the frozen ``StructuredSpec``. A bad, empty or oversized constraint
  raises ``ValueError`` (``GrammarRefused``) and nothing is kept. Requests without a spec are not
  tracked at all.
* ``bitmask_for(scheduled)`` before the model step starts filling one int32 bitmask with a row per
  constrained request that samples this step (None when there is none: unconstrained batches do no
  work). The fill is one batched library call (its own threads) on a worker thread, so it overlaps the
  model's forward; the sampler waits for it (``TokenBitmask.ready``) just before masking.
* ``advance(request_ids, token_ids)`` after the step feeds each constrained request its new token.
  It returns the requests whose grammar is complete (the matcher accepted a stop token, which the mask
  allows only where the grammar may end): the engine finishes them with reason ``stop``. A token the matcher rejects (it cannot
  happen with the mask applied unless sampling is bypassed) fails that request.
* ``remove(request_id)`` when the request finishes, is aborted or fails.

Threads: matchers are touched by one fill at a time; every other use of them (``add``, ``advance``,
``remove``, the next fill) first waits for the fill in flight (``_settle``). The cache, the compiler and
``compile_checked`` are thread-safe; everything else belongs to the engine's thread.

Stop tokens: the matcher allows the engine's EOS ids and the request's ``stop_token_ids`` only where the
grammar may end, and nowhere else, so a constrained request ends exactly when its output is complete
(or at ``max_tokens`` with reason ``length``, the output then cut short).

Preemption: this engine preempts by recompute and keeps the output tokens, which the matcher has
already consumed; the resumed request samples its next token from the same matcher state, so no
rollback is needed (a test preempts constrained requests and validates their output).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING

from agent_engine.engine.engine_stats import GrammarStats
from agent_engine.engine.grammar_build import ReadyGrammar, compile_prepared, prepare_grammar
from agent_engine.engine.grammar_limits import DEFAULT_MAX_GRAMMAR_SIZE, GrammarLimits
from agent_engine.engine.grammar_workers import FAST_WORKER_NICE, WORKER_NICE, GrammarWorkers
from agent_engine.model.sampler import TokenBitmask
from scheduler import SamplingParams, ScheduledRequest, StructuredSpec

if TYPE_CHECKING:
    import torch
    import xgrammar
    from transformers import PreTrainedTokenizerBase

DEFAULT_CACHE_SIZE = 128
COMPILER_THREADS = 2


class GrammarCache:
    """An LRU of compiled grammars keyed by spec, bounded to ``capacity`` entries (thread-safe)."""

    def __init__(self, capacity: int = DEFAULT_CACHE_SIZE) -> None:
        if capacity < 1:
            raise ValueError("grammar cache capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[StructuredSpec, xgrammar.CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        self.compile_seconds = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, spec: StructuredSpec) -> xgrammar.CompiledGrammar | None:
        """The cached grammar of ``spec`` (now the most recent), or None; counts a hit."""
        with self._lock:
            found = self._items.get(spec)
            if found is not None:
                self._items.move_to_end(spec)
                self.hits += 1
            return found

    def put(self, spec: StructuredSpec, compiled: xgrammar.CompiledGrammar, seconds: float) -> None:
        """Cache a grammar that took ``seconds`` to compile (a miss), evicting the least recent."""
        with self._lock:
            self.misses += 1
            self.compile_seconds += seconds
            self._items[spec] = compiled
            self._items.move_to_end(spec)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
                self.evictions += 1

    def get_or_compile(self, spec: StructuredSpec,
                       compile_fn: Callable[[StructuredSpec], xgrammar.CompiledGrammar]) -> xgrammar.CompiledGrammar:
        found = self.get(spec)
        if found is not None:
            return found
        t0 = time.perf_counter()
        compiled = compile_fn(spec)  # outside the lock: compiling may take a while
        self.put(spec, compiled, time.perf_counter() - t0)
        return compiled


class StructuredOutputManager:
    """Grammars and matchers of one engine (one tokenizer). Not thread-safe apart from the cache."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, vocab_size: int, eos_token_ids: Sequence[int],
                 cache_size: int = DEFAULT_CACHE_SIZE, max_grammar_size: int = DEFAULT_MAX_GRAMMAR_SIZE) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size  # the model's (logits may be padded past the tokenizer's)
        self.eos_token_ids = tuple(eos_token_ids)
        self.max_grammar_size = max_grammar_size  # for inline compiles (``compile_checked`` has its limits)
        self.cache = GrammarCache(cache_size)
        self._matchers: dict[str, xgrammar.GrammarMatcher] = {}
        self._xgr: ModuleType | None = None  # the library, once imported
        self._compiler: xgrammar.GrammarCompiler | None = None
        self._info: xgrammar.TokenizerInfo | None = None
        self._init_lock = threading.Lock()
        self._workers: GrammarWorkers | None = None
        self._bitmask: torch.Tensor | None = None  # reused int32 buffer, grown on demand
        self._batch: xgrammar.BatchGrammarMatcher | None = None  # one call fills every row
        self._filler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar-mask")
        self._pending: Future[None] | None = None
        self._niced = threading.local()

    # ---- compiling -----------------------------------------------------------------------------
    def _ensure_compiler(self) -> xgrammar.GrammarCompiler:
        with self._init_lock:
            if self._compiler is None:
                import xgrammar

                self._info = xgrammar.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=list(self.eos_token_ids) or None)
                # Our LRU is the cache: the compiler's own would hold a second, differently bounded copy.
                # One thread: a compile runs on its caller's (lowered-priority) thread, nowhere else.
                self._compiler = xgrammar.GrammarCompiler(self._info, max_threads=1, cache_enabled=False)
                self._batch = xgrammar.BatchGrammarMatcher(max_threads=COMPILER_THREADS)
                self._xgr = xgrammar
            return self._compiler

    def _compile_uncached(self, spec: StructuredSpec) -> xgrammar.CompiledGrammar:
        return compile_prepared(self._ensure_compiler(), prepare_grammar(spec, self.max_grammar_size))

    def compile(self, spec: StructuredSpec) -> xgrammar.CompiledGrammar:
        """The compiled grammar of ``spec`` (cached), compiled on this thread with no time budget;
        ``GrammarRefused`` (a ValueError) if it is invalid, too large or admits no output."""
        return self.cache.get_or_compile(spec, self._compile_uncached)

    def cached(self, spec: StructuredSpec) -> ReadyGrammar | None:
        """The cached grammar of ``spec``, or None (thread-safe and cheap: no compile, no import)."""
        found = self.cache.get(spec)
        return None if found is None else ReadyGrammar(spec, found)

    def compile_checked(self, spec: StructuredSpec, limits: GrammarLimits, cancel: threading.Event,
                        fast: bool = False) -> ReadyGrammar:
        """``spec`` compiled, never spending more than ``limits`` on it: a cached grammar, or one whose
        trial compile in a worker process (of the fast lane with ``fast``) finished within the budget,
        then compiled on this thread at lower priority. Raises ``GrammarRefused``, ``GrammarCancelled``
        (``cancel`` was set), ``FastLaneExceeded`` or ``GrammarWorkerDied`` (``grammar_workers``). Call
        it from a dedicated pool thread, one per lane (its priority stays lowered); the first call sizes
        the workers."""
        found = self.cache.get(spec)
        if found is not None:
            return ReadyGrammar(spec, found)
        compiler = self._ensure_compiler()
        with self._init_lock:
            if self._workers is None:
                assert self._info is not None
                self._workers = GrammarWorkers(self._info.serialize_json(), limits.workers)
            workers = self._workers
        prepared = workers.prepare(spec, limits, cancel, fast)
        self._lower_thread_priority(FAST_WORKER_NICE if fast else WORKER_NICE)
        t0 = time.perf_counter()
        compiled = compile_prepared(compiler, prepared)
        self.cache.put(spec, compiled, time.perf_counter() - t0)
        return ReadyGrammar(spec, compiled)

    def _lower_thread_priority(self, nice: int) -> None:
        if getattr(self._niced, "done", False):
            return
        self._niced.done = True
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)  # Linux: this thread only
        except (AttributeError, OSError):
            pass

    def close(self) -> None:
        """Kill the grammar worker processes (a running trial compile is not waited for)."""
        with self._init_lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.close()

    # ---- the matcher lifecycle -----------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether any live request is constrained (if not, the engine skips every hook)."""
        return bool(self._matchers)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._matchers

    def add(self, request_id: str, params: SamplingParams, ready: ReadyGrammar | None = None) -> None:
        """Create the matcher of a request with ``params.structured`` (no-op without), from ``ready`` when
        given (it must be that spec's), else compiled now. ValueError if bad."""
        spec = params.structured
        if spec is None:
            return
        if ready is not None and ready.spec != spec:
            raise ValueError("the compiled grammar given is not the request's output format")
        self._settle()
        if request_id in self._matchers:
            raise ValueError(f"duplicate request id {request_id!r}")
        compiled = ready.compiled if ready is not None else self.compile(spec)
        stops = list(self.eos_token_ids)
        stops += [t for t in params.stop_token_ids if t not in stops and 0 <= t < self.vocab_size]
        override = stops if stops != list(self.eos_token_ids) else None
        self._matchers[request_id] = self._xgr.GrammarMatcher(compiled, override_stop_tokens=override)

    def remove(self, request_id: str) -> None:
        if request_id in self._matchers:
            self._settle()
            del self._matchers[request_id]

    def _settle(self) -> None:
        """Wait for the fill in flight (if any): after this no other thread touches the matchers."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def bitmask_for(self, scheduled: Sequence[ScheduledRequest]) -> TokenBitmask | None:
        """The allowed tokens of every constrained request that samples this step, or None if none does."""
        if not self._matchers:
            return None
        todo = [(s.request_id, m) for s in scheduled
                if s.do_sample and (m := self._matchers.get(s.request_id)) is not None]
        if not todo:
            return None
        self._settle()
        if self._bitmask is None or self._bitmask.shape[0] < len(todo):
            self._bitmask = self._xgr.allocate_token_bitmask(max(len(todo), 8), self.vocab_size)
        rows = {rid: i for i, (rid, _) in enumerate(todo)}
        view = self._bitmask[: len(todo)]
        matchers = [m for _, m in todo]
        self._pending = self._filler.submit(self._batch.batch_fill_next_token_bitmask, matchers, view)
        return TokenBitmask(view, rows, self._pending)

    def advance(self, request_ids: Sequence[str], token_ids: Sequence[int]) -> tuple[list[str], dict[str, str]]:
        """Feed each constrained request its new token. Returns ``(complete, failed)``: the requests whose
        grammar is complete (the engine finishes them) and those whose token was rejected (id -> why)."""
        complete: list[str] = []
        failed: dict[str, str] = {}
        self._settle()
        matchers = self._matchers
        for rid, tok in zip(request_ids, token_ids, strict=True):
            m = matchers.get(rid)
            if m is None:
                continue
            if not m.accept_token(tok):
                failed[rid] = f"token {tok} does not continue the output's grammar"
            elif m.is_terminated():
                complete.append(rid)
        return complete, failed

    def stats(self) -> GrammarStats:
        c = self.cache
        workers = self._workers
        return GrammarStats(
            constrained_requests=len(self._matchers), grammar_cache_size=len(c), grammar_cache_hits=c.hits,
            grammar_cache_misses=c.misses, grammar_cache_evictions=c.evictions,
            grammar_compile_seconds=round(c.compile_seconds, 6),
            grammar_compiles_timed_out=workers.timed_out if workers is not None else 0,
            grammar_compiles_cancelled=workers.cancelled if workers is not None else 0,
            grammar_compiles_demoted=workers.demoted if workers is not None else 0,
            grammar_workers_died=workers.died if workers is not None else 0)
