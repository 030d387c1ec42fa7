"""The engine thread's commands: small frozen messages, one per thing the server may ask of the engine.

``AsyncEngine`` queues them from any thread and its engine thread dispatches on their type (``match``)
before each step. No command carries code: what may run on the engine thread is this closed set, each
naming the engine member it runs (``EngineLike``), so what crosses threads is read off these types.

- ``AddRequests``: a group's prepared requests, added together (or the group is rejected);
- ``AbortRequests``: abort requests by id (unknown or finished ids are ignored);
- ``ReleaseJob``: end a job's pin (the engine's, tenant-scoped id), answered with whether it held one,
  or None when the engine does not know the job;
- ``TakeStats``: answered with one ``EngineStats`` snapshot;
- ``TakeRoutingStats``: answered with the engine's ``RoutingStats`` (what a replica's router reads);
- ``CheckBusy``: answered with whether the engine has unfinished requests (a replica's drain waits on it).

Invariants: a question (a command with a ``future``) is answered exactly once: with its answer, with
what the engine raised (``resolve``), or with the engine loop's death (``fail``); a future its caller
cancelled is left alone.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agent_engine.engine.engine_request import EngineRequest
from agent_engine.engine.engine_stats import EngineStats, RoutingStats
from agent_engine.server.groups import RequestGroup

__all__ = ["AbortRequests", "AddRequests", "CheckBusy", "Command", "Question", "ReleaseJob", "TakeRoutingStats",
           "TakeStats", "fail", "resolve"]

T = TypeVar("T")


@dataclass(frozen=True)
class AddRequests:
    """Add a group's prepared requests: all of them, or none (the group is rejected)."""

    group: RequestGroup
    requests: tuple[EngineRequest, ...]


@dataclass(frozen=True)
class AbortRequests:
    request_ids: tuple[str, ...]


@dataclass(frozen=True)
class ReleaseJob:
    """End a job's pin (the engine's, tenant-scoped id): ``future`` gets whether it held one, or None
    when the engine does not know the job."""

    job_id: str
    future: concurrent.futures.Future[bool | None]


@dataclass(frozen=True)
class TakeStats:
    """``future`` gets one ``EngineStats`` snapshot."""

    future: concurrent.futures.Future[EngineStats]


@dataclass(frozen=True)
class TakeRoutingStats:
    """``future`` gets the engine's ``RoutingStats``."""

    future: concurrent.futures.Future[RoutingStats]


@dataclass(frozen=True)
class CheckBusy:
    """``future`` gets whether the engine has unfinished requests."""

    future: concurrent.futures.Future[bool]


Question = ReleaseJob | TakeStats | TakeRoutingStats | CheckBusy
Command = AddRequests | AbortRequests | Question


def resolve(future: concurrent.futures.Future[T], answer: Callable[[], T]) -> None:
    """Resolve ``future`` with ``answer()``, or with what it raised (the engine loop goes on either way)."""
    if future.set_running_or_notify_cancel():
        try:
            future.set_result(answer())
        except BaseException as exc:  # delivered to the caller
            future.set_exception(exc)


def fail(question: Question, error: BaseException) -> None:
    """Answer ``question`` with ``error`` (the engine loop died before it was asked)."""
    if question.future.set_running_or_notify_cancel():
        question.future.set_exception(error)
