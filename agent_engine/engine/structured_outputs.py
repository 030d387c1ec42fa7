"""Structured outputs in the engine: compiled grammars, one matcher per request, the step's bitmask.

The library is xgrammar (``GrammarCompiler`` / ``GrammarMatcher``); it is imported on the first
constrained request, so an engine that never sees one pays nothing (no import, no tokenizer scan).

Lifecycle (driven by ``LLMEngine``):

* ``add(request_id, params)`` at intake compiles ``params.structured`` (an LRU cache of
  ``cache_size`` compiled grammars per manager, i.e. per tokenizer, keyed by the frozen
  ``StructuredSpec``) and creates the request's matcher. A bad schema / regex / grammar raises
  ``ValueError`` and nothing is kept. Requests without a spec are not tracked at all.
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
``remove``, the next fill) first waits for the fill in flight (``_settle``).

Stop tokens: the matcher allows the engine's EOS ids and the request's ``stop_token_ids`` only where the
grammar may end, and nowhere else, so a constrained request ends exactly when its output is complete
(or at ``max_tokens`` with reason ``length``, the output then cut short).

Preemption: this engine preempts by recompute and keeps the output tokens, which the matcher has
already consumed; the resumed request samples its next token from the same matcher state, so no
rollback is needed (a test preempts constrained requests and validates their output).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agent_engine.model.sampler import TokenBitmask
from scheduler import SamplingParams, StructuredSpec

DEFAULT_CACHE_SIZE = 128
COMPILER_THREADS = 2


def choice_grammar(options: Sequence[str]) -> str:
    """An EBNF grammar whose language is exactly ``options`` (JSON string escapes are valid in xgrammar)."""
    return "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in options)


class GrammarCache:
    """An LRU of compiled grammars keyed by spec, bounded to ``capacity`` entries (thread-safe)."""

    def __init__(self, capacity: int = DEFAULT_CACHE_SIZE) -> None:
        if capacity < 1:
            raise ValueError("grammar cache capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[StructuredSpec, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        self.compile_seconds = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def get_or_compile(self, spec: StructuredSpec, compile_fn: Any) -> Any:
        with self._lock:
            found = self._items.get(spec)
            if found is not None:
                self._items.move_to_end(spec)
                self.hits += 1
                return found
        t0 = time.perf_counter()
        compiled = compile_fn(spec)  # outside the lock: compiling may take a while
        with self._lock:
            self.misses += 1
            self.compile_seconds += time.perf_counter() - t0
            self._items[spec] = compiled
            self._items.move_to_end(spec)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
                self.evictions += 1
        return compiled


class StructuredOutputManager:
    """Grammars and matchers of one engine (one tokenizer). Not thread-safe apart from the cache."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Sequence[int],
                 cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size  # the model's (logits may be padded past the tokenizer's)
        self.eos_token_ids = tuple(eos_token_ids)
        self.cache = GrammarCache(cache_size)
        self._matchers: dict[str, Any] = {}
        self._xgr: Any = None
        self._compiler: Any = None
        self._bitmask: Any = None  # reused int32 buffer, grown on demand
        self._batch: Any = None  # xgrammar's BatchGrammarMatcher: one call fills every row
        self._filler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grammar-mask")
        self._pending: Future[None] | None = None

    # ---- compiling -----------------------------------------------------------------------------
    def _ensure_compiler(self) -> Any:
        if self._compiler is None:
            import xgrammar

            info = xgrammar.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=list(self.eos_token_ids) or None)
            # Our LRU is the cache: the compiler's own would hold a second, differently bounded copy.
            self._compiler = xgrammar.GrammarCompiler(info, max_threads=COMPILER_THREADS, cache_enabled=False)
            self._batch = xgrammar.BatchGrammarMatcher(max_threads=COMPILER_THREADS)
            self._xgr = xgrammar
        return self._compiler

    def _compile_uncached(self, spec: StructuredSpec) -> Any:
        compiler = self._ensure_compiler()
        try:
            if spec.kind == "json":
                return compiler.compile_json_schema(spec.value, any_whitespace=spec.any_whitespace,
                                                    strict_mode=False)
            if spec.kind == "regex":
                return compiler.compile_regex(spec.value)
            if spec.kind == "choice":
                return compiler.compile_grammar(choice_grammar(spec.value))
            if spec.kind == "structural_tag":
                return compiler.compile_structural_tag(spec.value)
            return compiler.compile_grammar(spec.value)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ValueError(f"invalid {spec.kind} for structured output: {_first_line(exc)}") from None

    def compile(self, spec: StructuredSpec) -> Any:
        """The compiled grammar of ``spec`` (cached); ValueError if the library rejects it."""
        return self.cache.get_or_compile(spec, self._compile_uncached)

    # ---- the matcher lifecycle -----------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether any live request is constrained (if not, the engine skips every hook)."""
        return bool(self._matchers)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._matchers

    def add(self, request_id: str, params: SamplingParams) -> None:
        """Create the matcher of a request with ``params.structured`` (no-op without). ValueError if bad."""
        spec = params.structured
        if spec is None:
            return
        self._settle()
        if request_id in self._matchers:
            raise ValueError(f"duplicate request id {request_id!r}")
        compiled = self.compile(spec)
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

    def bitmask_for(self, scheduled: Sequence[Any]) -> TokenBitmask | None:
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

    def stats(self) -> dict[str, Any]:
        c = self.cache
        return {"constrained_requests": len(self._matchers), "grammar_cache_size": len(c),
                "grammar_cache_hits": c.hits, "grammar_cache_misses": c.misses,
                "grammar_cache_evictions": c.evictions, "grammar_compile_seconds": round(c.compile_seconds, 6)}


def _first_line(exc: BaseException) -> str:
    """The library's message without its C++ source location prefix."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    if text.startswith("/") and ": " in text:  # "/path/file.cc:83: message"
        text = text.split(": ", 1)[1]
    return text
