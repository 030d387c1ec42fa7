"""Which agent job does a request belong to? Every session convention real clients send, in one order.

``request_hints(body, headers, tenant)`` builds the request's one ``JobHints`` value (job id, where it
came from, tenant, ``is_last_step``, ``priority``, ``cache_salt``, ``tool_name``, ``tool_ttl_hint``),
carried whole to the engine. The job id is the first one found, in this precedence (``hint_source``
names it):

==  =========================  ===========================================================
 1  ``job_id``                 JSON body (our hint; the OpenAI SDK sends it via ``extra_body``)
 2  ``session_id``             JSON body
 3  ``x-job-id``               header
 4  ``x-session-id``           header
 5  ``prompt_cache_key``       JSON body (OpenAI SDK, Codex)
 6  ``metadata.session_id``    JSON body (OpenHands and others)
 7  ``litellm_session_id``     JSON body or its ``metadata`` (LiteLLM; ``extra_body`` lands at the top)
 8  ``claude-code``            header ``X-Claude-Code-Session-Id`` (Claude Code)
 9  ``session-id``             header ``session-id`` or ``session_id`` (Codex)
10  ``metadata.user_id``       Anthropic ``metadata.user_id`` when it carries a session: a plain id, a
                               ``..._session_<uuid>`` suffix, or a JSON object with ``session_id``
==  =========================  ===========================================================

With none of them the source is ``none`` (the engine may still infer the job from the prefix chain).

Invariants:
- A hint of the wrong type (a number where a string belongs, a non-object ``metadata``) is a
  ``ValueError`` naming the field: routes turn it into a 400.
- Our own ``job_id`` / ``session_id`` / ``x-job-id`` must be 1..``MAX_JOB_ID_CHARS`` characters of
  ``[A-Za-z0-9._:@/+=-]`` (else ``ValueError``); ids taken from other conventions, which clients send
  unasked, are never refused: an id that is too long or uses other characters is replaced by
  ``"h-" + sha256(id)[:32]`` (stable, so every turn of the session still maps to one job).
- Empty strings count as absent.
- Every hint string is bounded: ``tool_name`` and ``cache_salt`` at ``MAX_HINT_CHARS`` (else
  ``ValueError``), a ``metadata.user_id`` is read as JSON only up to ``MAX_USER_ID_JSON_CHARS`` and
  ``MAX_JSON_DEPTH`` levels (longer or deeper: an opaque id, hashed like any other).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from agent_engine.json_types import JsonValue
from agent_engine.server.request_limits import loads_bounded
from scheduler import JobHints

__all__ = ["HINT_SOURCES", "MAX_HINT_CHARS", "MAX_JOB_ID_CHARS", "request_hints", "resolve_job"]

MAX_JOB_ID_CHARS = 256
MAX_HINT_CHARS = 256
MAX_USER_ID_JSON_CHARS = 4096
_SAFE_ID = re.compile(r"[A-Za-z0-9._:@/+=\-]{1," + str(MAX_JOB_ID_CHARS) + "}")
_SESSION_SUFFIX = re.compile(r"_session_([A-Za-z0-9\-]{8,})$")

Lookup = Callable[[Mapping[str, Any], Mapping[str, str]], Any]


def _body(key: str) -> Lookup:
    return lambda body, headers: body.get(key)


def _header(*names: str) -> Lookup:
    return lambda body, headers: next((headers[n] for n in names if headers.get(n)), None)


def _metadata(key: str) -> Lookup:
    return lambda body, headers: _object(body, "metadata").get(key)


def _litellm(body: Mapping[str, JsonValue], headers: Mapping[str, str]) -> Any:
    return body.get("litellm_session_id") or _object(body, "metadata").get("litellm_session_id")


def _anthropic_user(body: Mapping[str, JsonValue], headers: Mapping[str, str]) -> Any:
    user = _object(body, "metadata").get("user_id")
    if user is None or not isinstance(user, str):
        return user
    return session_of_user_id(user)


# (source, lookup, strict): strict sources are our own hints, validated instead of hashed.
_SOURCES: tuple[tuple[str, Lookup, bool], ...] = (
    ("job_id", _body("job_id"), True),
    ("session_id", _body("session_id"), True),
    ("x-job-id", _header("x-job-id"), True),
    ("x-session-id", _header("x-session-id"), True),
    ("prompt_cache_key", _body("prompt_cache_key"), False),
    ("metadata.session_id", _metadata("session_id"), False),
    ("litellm_session_id", _litellm, False),
    ("claude-code", _header("x-claude-code-session-id"), False),
    ("session-id", _header("session-id", "session_id"), False),
    ("metadata.user_id", _anthropic_user, False),
)
HINT_SOURCES: tuple[str, ...] = tuple(name for name, _, _ in _SOURCES) + ("inferred", "none")


def session_of_user_id(user_id: str) -> str | None:
    """The session an Anthropic ``metadata.user_id`` carries: a JSON object's ``session_id``, the
    ``<uuid>`` of a ``..._session_<uuid>`` suffix, or the plain id itself."""
    text = user_id.strip()
    if text.startswith("{"):
        try:
            obj = loads_bounded(text, MAX_USER_ID_JSON_CHARS)
        except ValueError:
            return text or None
        sid = obj.get("session_id") if isinstance(obj, dict) else None
        return sid if isinstance(sid, str) and sid else None
    match = _SESSION_SUFFIX.search(text)
    return match.group(1) if match else (text or None)


def resolve_job(body: Mapping[str, JsonValue], headers: Mapping[str, str]) -> tuple[str | None, str]:
    """``(job_id, hint_source)`` from the first convention present (see the table above)."""
    for source, lookup, strict in _SOURCES:
        value = lookup(body, headers)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ValueError(f"{source} must be a string, got {type(value).__name__}")
        return (_checked_id(source, value) if strict else _safe_id(value)), source
    return None, "none"


def request_hints(body: Mapping[str, JsonValue], headers: Mapping[str, str],
                  tenant: str | None = None) -> JobHints:
    """The request's job and scheduling hints, as the client gave them (not yet tenant-scoped).

    ``body`` is the parsed JSON body (a dict); ``headers`` a case-insensitive mapping (Starlette's
    ``request.headers``) or a dict with lower-case keys; ``tenant`` the caller's (``server.auth``),
    whose namespace the job id lives in."""
    if not isinstance(body, Mapping):
        raise ValueError("the request body must be a JSON object")
    job_id, source = resolve_job(body, headers)
    return JobHints(
        job_id=job_id,
        hint_source=source,
        tenant=tenant,
        is_last_step=_typed(body, "is_last_step", bool, False),
        priority=_typed(body, "priority", int, 0),
        cache_salt=_bounded(_typed(body, "cache_salt", str, None), "cache_salt"),
        tool_name=_bounded(_typed(body, "tool_name", str, None), "tool_name"),
        tool_ttl_hint=_ttl_hint(body.get("tool_ttl_hint")),
    )


def _object(body: Mapping[str, JsonValue], key: str) -> Mapping[str, JsonValue]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be an object, got {type(value).__name__}")
    return value


def _checked_id(source: str, value: str) -> str:
    if not _SAFE_ID.fullmatch(value):
        raise ValueError(f"{source} must be 1-{MAX_JOB_ID_CHARS} characters of [A-Za-z0-9._:@/+=-]")
    return value


def _safe_id(value: str) -> str:
    if _SAFE_ID.fullmatch(value):
        return value
    return "h-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _typed(body: Mapping[str, JsonValue], key: str, kind: type, default: Any) -> Any:
    value = body.get(key)
    if value is None:
        return default
    bad = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
    if bad:
        raise ValueError(f"{key} must be of type {kind.__name__}, got {type(value).__name__}")
    return value


def _bounded(value: str | None, key: str) -> str | None:
    if value is not None and len(value) > MAX_HINT_CHARS:
        raise ValueError(f"{key} must be at most {MAX_HINT_CHARS} characters")
    return value


def _ttl_hint(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or value == float("inf"):
        raise ValueError("tool_ttl_hint must be a finite number of seconds >= 0")
    return float(value)
