"""Preparing a route's requests for the engine: ``RequestSpec`` -> ``EngineRequest``, off the event
loop and the engine thread.

Invariants:
- A group of specs becomes the engine's messages on a pool shared fairly by tenants
  (``tokenizer_pool``): the chat template rendered, the prompt tokenized once, ``max_tokens`` filled,
  the hints scoped to the tenant (``JobHints.scoped``). A huge prompt stalls neither the engine's steps
  nor another tenant's preparation.
- Then each new output constraint is compiled on a second fair pool (``grammar_workers`` threads, one
  tenant using at most all but one), within ``grammar_limits`` (``LLMEngine.compile_grammar``: a trial
  compile in a worker process that is killed past the budget), each distinct constraint of a group
  once. ``prepare`` returns only with every grammar ready, so the step loop never compiles; a refused
  constraint raises (its ``GrammarRefused`` is the client's 400).
- Cancelling ``prepare`` (the group was aborted) kills its running compile; ``close_grammars`` cancels
  every running compile and waits for none.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.prompts import PromptType
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.tokenizer_pool import FairTokenizerPool
from scheduler import NO_HINTS, JobHints, SamplingParams, StructuredSpec

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
    chose, e.g. the tool-call family); a spec it returns becomes ``params.structured``.
    """

    request_id: str
    prompt: PromptType | RenderPrompt
    params: SamplingParams
    fill_max_tokens: bool = False
    hints: JobHints = NO_HINTS
    constraint: Callable[[], StructuredSpec | None] | None = None


class RequestPreparer:
    """The two fair pools a group of specs passes through before it reaches the engine thread."""

    def __init__(self, engine: EngineLike, tokenizer_workers: int, grammar_limits: GrammarLimits) -> None:
        self.engine = engine
        self.grammar_limits = grammar_limits
        self.tokenizer_pool = FairTokenizerPool(tokenizer_workers)
        self.grammar_pool = FairTokenizerPool(grammar_limits.workers, name="grammar")
        self._compiles: set[threading.Event] = set()  # cancel flags of running compiles
        self._compiles_lock = threading.Lock()

    async def prepare(self, tenant: str | None, specs: Sequence[RequestSpec], max_total_tokens: int | None,
                      share_prefix_cache: bool) -> tuple[EngineRequest, ...]:
        """``specs`` as the engine's messages, tokenized in ``tenant``'s turn, then with their grammars
        compiled. Raises what ``prepare_requests`` or a compile raised; ``PoolClosedError`` or
        ``GrammarCancelled`` once the pools are shut."""
        requests = await self.tokenizer_pool.run(
            tenant, lambda: prepare_requests(self.engine, specs, max_total_tokens, share_prefix_cache))
        return tuple(await self._compile_grammars(tenant, requests))

    async def run_on_tokenizer(self, tenant: str | None, fn: Callable[[EngineLike], T]) -> T:
        """``fn(engine)`` on the tokenizer pool in ``tenant``'s turn (work that only reads the tokenizer)."""
        return await self.tokenizer_pool.run(tenant, lambda: fn(self.engine))

    def close_grammars(self) -> None:
        """Refuse new compiles and kill the running ones' worker processes (nobody waits for them)."""
        self.grammar_pool.shutdown()
        with self._compiles_lock:
            running = list(self._compiles)
        for cancel in running:
            cancel.set()

    def close_tokenizer(self) -> None:
        self.tokenizer_pool.shutdown()

    async def _compile_grammars(self, tenant: str | None, requests: list[EngineRequest]) -> list[EngineRequest]:
        """The requests with their output constraints compiled (each distinct one once), in ``tenant``'s
        turn on the grammar pool."""
        compiled: dict[StructuredSpec, ReadyGrammar] = {}
        out = []
        for request in requests:
            structured = request.structured
            if structured is None:
                out.append(request)
                continue
            if structured not in compiled:
                compiled[structured] = await self._compile_one(tenant, structured)
            out.append(replace(request, grammar=compiled[structured]))
        return out

    async def _compile_one(self, tenant: str | None, spec: StructuredSpec) -> ReadyGrammar:
        cancel = threading.Event()
        with self._compiles_lock:
            self._compiles.add(cancel)
        try:
            return await self.grammar_pool.run(
                tenant, lambda: self.engine.compile_grammar(spec, self.grammar_limits, cancel))
        except asyncio.CancelledError:
            cancel.set()  # the worker trying this grammar is killed
            raise
        finally:
            with self._compiles_lock:
                self._compiles.discard(cancel)


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
    return EngineRequest(spec.request_id, tuple(ids), text, params, spec.hints.scoped(share_prefix_cache))
