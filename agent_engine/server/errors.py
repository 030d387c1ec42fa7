"""Error bodies for every failure: OpenAI's ``{"error": {"message", "type", "param", "code"}}``, and
Anthropic's ``{"type": "error", "error": {"type": ..., "message": ...}}`` on the Messages API.

Invariants: every non-2xx response of the app (our own errors, validation errors, unknown routes,
unexpected exceptions) has the OpenAI shape, except on the Anthropic Messages API (``/v1/messages`` and
below), where the same failures take Anthropic's shape; FastAPI's default 422 body never escapes. The
Anthropic error ``type`` follows the HTTP status the way Anthropic's API does (400
invalid_request_error, 401 authentication_error, 404 not_found_error, 503/529 overloaded_error, other
5xx api_error).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent_engine.json_types import JsonObject

logger = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "internal_server_error",
    503: "service_unavailable_error",
}


ANTHROPIC_PREFIX = "/v1/messages"

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


class APIError(Exception):
    """An error with its HTTP status; rendered by the app's handler as an OpenAI error body."""

    def __init__(self, status_code: int, message: str, *, param: str | None = None, code: str | None = None,
                 err_type: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.code = code
        self.err_type = err_type or _TYPES.get(status_code, "api_error")
        self.headers = headers

    def body(self) -> JsonObject:
        return error_body(self.message, self.err_type, self.param, self.code)


def error_body(message: str, err_type: str, param: str | None = None,
               code: str | None = None) -> JsonObject:
    """The OpenAI error object (also used as the payload of an error event in a stream)."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def error_response(err: APIError, path: str = "") -> JSONResponse:
    """``err`` as a response in the API style of ``path`` (Anthropic for ``/v1/messages*``)."""
    return JSONResponse(error_body_for(err, path), status_code=err.status_code, headers=err.headers)


def error_body_for(err: APIError, path: str) -> JsonObject:
    if is_anthropic_path(path):
        return anthropic_error_body(err.status_code, err.message)
    return err.body()


def is_anthropic_path(path: str) -> bool:
    """Whether ``path`` belongs to the Messages API (``/v1/messages`` and everything under it)."""
    return path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/")


def anthropic_error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    if status in _ANTHROPIC_TYPES:
        return _ANTHROPIC_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def anthropic_error_body(status: int, message: str) -> JsonObject:
    """The Anthropic error body for a failure with HTTP ``status``."""
    return {"type": "error", "error": {"type": anthropic_error_type(status), "message": message}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errs = exc.errors()
    if not errs:
        return "invalid request", None
    first = errs[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return f"malformed JSON body: {first.get('msg', '')}", None
    parts = []
    for e in errs[:5]:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    return "; ".join(parts), param


def install_error_handlers(app: FastAPI) -> None:
    """Route every error path of ``app`` to an OpenAI-style body (400 for validation, not 422); on
    ``/v1/messages*`` to an Anthropic body."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return error_response(APIError(400, message, param=param, code="invalid_request"), request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else None
        return error_response(APIError(exc.status_code, str(exc.detail), code=code,
                                       headers=getattr(exc, "headers", None)), request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error in request")
        message = f"internal error: {type(exc).__name__}: {exc}"
        return error_response(APIError(500, message, code="internal_error"), request.url.path)
