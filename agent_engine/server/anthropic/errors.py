"""Anthropic error bodies: ``{"type": "error", "error": {"type": ..., "message": ...}}``.

Pure formatting, no imports from the rest of the server (``server.errors`` imports this module to
render every failure on an Anthropic path). Invariant: the error ``type`` follows the HTTP status the
way Anthropic's API does (400 invalid_request_error, 401 authentication_error, 404 not_found_error,
503/529 overloaded_error, other 5xx api_error).
"""

from __future__ import annotations

from typing import Any

ANTHROPIC_PREFIX = "/v1/messages"

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def is_anthropic_path(path: str) -> bool:
    """Whether ``path`` belongs to the Messages API (``/v1/messages`` and everything under it)."""
    return path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/")


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    if status in _TYPES:
        return _TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    """The Anthropic error body for a failure with HTTP ``status``."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}
