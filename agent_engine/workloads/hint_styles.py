"""How a client tells the server which job a request belongs to: one style per session convention.

A replay or benchmark picks a style to act like a given client: ``job_id`` (our hints: the job,
``is_last_step`` and ``tool_name``, plus a ``DELETE /v1/jobs/{id}`` at the end), ``none`` (no hint at
all, like mini-swe-agent: the server must infer the job), or a real client's convention, which carries
only the session id, as that client does (``prompt_cache_key`` for Codex and the OpenAI SDK,
``claude-code`` for Claude Code's header, ``litellm_session_id`` for LiteLLM, ...). The names are the
server's ``hint_source`` labels, so a replay's metrics are found under the style's own name.

Invariant: ``hint_fields`` never puts anything but the style's own fields in the body or headers.
"""

from __future__ import annotations

from agent_engine.json_types import JsonObject

__all__ = ["HINT_STYLES", "hint_fields", "releases_jobs"]

_BODY = {"session_id": "session_id", "prompt_cache_key": "prompt_cache_key"}
_HEADERS = {"x-job-id": "X-Job-Id", "x-session-id": "X-Session-ID", "claude-code": "X-Claude-Code-Session-Id",
            "session-id": "session-id"}
_METADATA = {"metadata.session_id": "session_id", "litellm_session_id": "litellm_session_id"}
HINT_STYLES: tuple[str, ...] = ("job_id", "none", *_BODY, *_HEADERS, *_METADATA, "metadata.user_id")


def hint_fields(style: str, job_id: str, is_last_step: bool, tool_name: str | None
                ) -> tuple[JsonObject, dict[str, str]]:
    """``(body fields, headers)`` that a client of ``style`` sends with one turn of ``job_id``."""
    if style == "job_id":
        return {"job_id": job_id, "is_last_step": is_last_step, "tool_name": tool_name}, {}
    if style == "none":
        return {}, {}
    if style in _BODY:
        return {_BODY[style]: job_id}, {}
    if style in _HEADERS:
        return {}, {_HEADERS[style]: job_id}
    if style in _METADATA:
        return {"metadata": {_METADATA[style]: job_id}}, {}
    if style == "metadata.user_id":
        return {"metadata": {"user_id": f"user_replay_account_replay_session_{job_id}"}}, {}
    raise ValueError(f"unknown hint style {style!r}; known: {', '.join(HINT_STYLES)}")


def releases_jobs(style: str) -> bool:
    """Whether a client of ``style`` ends its jobs with ``DELETE /v1/jobs/{id}`` (only our own hints)."""
    return style == "job_id"
