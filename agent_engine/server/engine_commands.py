"""The engine thread's command queue entries and the errors it raises to callers.

Invariant: the engine thread is the only consumer of commands; ``EngineCall`` futures are resolved there
(result or exception), ``AddGroup`` groups are accepted or rejected there.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_engine.server.engine_like import EngineLike
from agent_engine.server.groups import RequestGroup, RequestSpec

__all__ = ["Command", "EngineDeadError", "EngineStoppedError", "AbortRequests", "AddGroup", "EngineCall"]


class EngineDeadError(RuntimeError):
    """The engine loop has died; nothing can be served any more."""


class EngineStoppedError(RuntimeError):
    """The engine is shutting down and accepts no new requests."""


@dataclass(frozen=True)
class AddGroup:
    group: RequestGroup
    specs: list[RequestSpec]


@dataclass(frozen=True)
class AbortRequests:
    request_ids: list[str]


@dataclass(frozen=True)
class EngineCall:
    fn: Callable[[EngineLike], Any]
    future: concurrent.futures.Future[Any]


Command = AddGroup | AbortRequests | EngineCall
