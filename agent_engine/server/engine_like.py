"""``EngineLike``: exactly what the server uses of the engine it serves (``LLMEngine``, or a test fake).

The server reaches the engine only through these members, never by probing for others: a fake engine
implements all of them. The engine layer does not know this Protocol (the server depends on the engine,
not the other way), so ``LLMEngine`` matches it structurally.

Invariants: ``add_request`` and everything that changes the engine run on the engine thread only
(``AsyncEngine``); ``tokenize_prompt``, ``tokenizer``, ``max_model_len`` and ``vocab_size`` only read
the engine and may also be used on the tokenizer thread; ``compile_grammar`` is thread-safe and runs on
the grammar pool (its result reaches ``add_request`` as the ``EngineRequest``'s ``grammar``; ``fast``:
on the fast lane), ``cached_grammar`` is thread-safe and cheap (the event loop may call it). Job ids
given to ``knows_job`` and ``release_job`` are the engine's (tenant-scoped). ``listen_to_jobs`` adds a
listener of the engine's job table (the server's metrics hear each job's end there), before the engine
thread starts; what a request's output is read with travels on its ``EngineRequest`` (``tool_reader``).
``stats`` and ``routing_stats`` answer with typed, frozen snapshots (``engine.engine_stats``), asked on
the engine thread; the server reads their fields, never string keys.

``release_and_account`` is the engine's last act when the loop ends: release every pin (each counted)
and log the final account (INFO, ``FINAL_STATS_PREFIX`` then JSON), which says what was still running,
waiting or held and every pin counter, so an operator (and the fault benchmark) can check that nothing
was lost: no block in use, every pin created ended exactly once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from agent_engine.config import EngineConfig
from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.engine_stats import EngineStats, RoutingStats
from agent_engine.engine.grammar_build import ReadyGrammar
from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.engine.outputs import RequestOutput
from agent_engine.engine.prompts import PromptType
from scheduler import JobListener, StructuredSpec

logger = logging.getLogger("agent_engine.server.async_engine")  # the engine loop's log

FINAL_STATS_PREFIX = "final engine stats:"


class ServerTokenizer(Protocol):
    """What the server uses of the engine's tokenizer: token text for logprobs, and the chat template
    (``apply_chat_template`` with HF's keywords; the template's text is read as ``chat_template``)."""

    def decode(self, token_ids: list[int]) -> str: ...

    def apply_chat_template(self, conversation: list[dict[str, object]], *, add_generation_prompt: bool = ...,
                            tokenize: bool = ..., **kwargs: object) -> str: ...


@runtime_checkable
class EngineLike(Protocol):
    """The engine as the server sees it."""

    config: EngineConfig  # ``config.model``: the ``--model`` it was started with (also a valid model name)
    model_name: str
    max_model_len: int
    vocab_size: int
    tokenizer: ServerTokenizer

    def tokenize_prompt(self, prompt: PromptType) -> tuple[str | None, list[int]]: ...

    def add_request(self, request: EngineRequest) -> object: ...

    def compile_grammar(self, spec: StructuredSpec, limits: GrammarLimits, cancel: threading.Event,
                        fast: bool = False) -> ReadyGrammar: ...

    def cached_grammar(self, spec: StructuredSpec) -> ReadyGrammar | None: ...

    def abort(self, request_ids: Iterable[str]) -> None: ...

    def step(self) -> list[RequestOutput]: ...

    def has_unfinished_requests(self) -> bool: ...

    def knows_job(self, job_id: str) -> bool: ...

    def release_job(self, job_id: str) -> bool: ...

    def release_all_jobs(self) -> int: ...

    def listen_to_jobs(self, listener: JobListener) -> None: ...

    def holds_pins(self) -> bool: ...

    def stats(self) -> EngineStats: ...

    def routing_stats(self) -> RoutingStats: ...


def release_and_account(engine: EngineLike) -> None:
    """Release every pin the engine holds, then log the final account; never raises."""
    with contextlib.suppress(Exception):
        logger.info("released %d pins at shutdown", engine.release_all_jobs())
        logger.info("%s %s", FINAL_STATS_PREFIX, json.dumps(final_account(engine.stats()), default=str))


def final_account(stats: EngineStats) -> dict[str, object]:
    """What the final account says: requests still running or waiting, blocks in use, jobs still
    pinned, every pin counter, failed steps."""
    s = stats.scheduler
    return {"num_running": s.num_running, "num_waiting": s.num_waiting, "blocks_in_use": s.blocks_in_use,
            "num_pinned_jobs": s.num_pinned_jobs, "pins": s.pins.as_dict(), "num_failed_steps": stats.num_failed_steps}
