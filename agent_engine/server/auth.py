"""API keys and tenants: who may call what, and whose namespace a request lives in.

Each API key is a tenant, unless a keys file names one tenant for several keys (``KEY TENANT`` lines):
those keys are one tenant. With one key (or none) there is one, default tenant (``None``): jobs and the
prefix cache are shared as they are without keys. With several keys each key's tenant gets its own
job namespace (another tenant's job id is unknown to it), its own prefix-cache salt (unless sharing is
configured), its own share of the pin budget and its own tool-time estimator. A tenant's name is
``t-`` plus a SHA-256 prefix of its key: stable across restarts, never the key itself.

``AuthMiddleware`` (pure ASGI, so client disconnects still reach the handlers) checks
``Authorization: Bearer KEY`` or ``x-api-key: KEY`` (Anthropic's SDK) on ``/v1/*`` and, unless
``open_metrics``, on ``/metrics`` and the API docs; ``/health`` is always open. A missing or unknown
key is a 401 in the API's own error shape (Anthropic's under ``/v1/messages``). The tenant of an
accepted request is put in ``scope["state"]["tenant"]``. Every HTTP request is counted by route
template and status class (never by raw path).

Admin keys (``--admin-key``) are not tenants: they open ``/metrics`` and the docs only, and read every
tenant's series there (``scope["state"]["admin"]``); a tenant's key reads only its own series.

Invariants: keys are compared in constant time; a key never appears in a log, a label or a tenant name.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_engine.server.errors import APIError

__all__ = ["AuthMiddleware", "Tenants", "load_keys_file", "metrics_viewer", "tenant_of_scope"]

DOC_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
_ANTHROPIC_PREFIX = "/v1/messages"


@dataclass(frozen=True)
class Tenants:
    """The accepted keys and their tenants (``None`` = the default tenant)."""

    keys: dict[str, str | None] = field(default_factory=dict)
    admin_keys: tuple[str, ...] = ()

    @classmethod
    def from_keys(cls, keys: Iterable[str], admin_keys: Iterable[str] = (),
                  named: Mapping[str, str] | None = None) -> Tenants:
        """The tenants of ``keys``: one per key, except that keys ``named`` with one tenant name share
        that tenant (its shares, namespace, salt and estimator: a tenant with two keys is one tenant)."""
        unique = list(dict.fromkeys(k for k in keys if k))
        admins = tuple(dict.fromkeys(k for k in admin_keys if k and k not in unique))
        if len(unique) <= 1:
            return cls(dict.fromkeys(unique), admins)
        named = named or {}
        return cls({k: _tenant_name(f"tenant:{named[k]}" if k in named else k) for k in unique}, admins)

    @property
    def required(self) -> bool:
        return bool(self.keys) or bool(self.admin_keys)

    def is_admin(self, presented: str | None) -> bool:
        """Whether ``presented`` is an admin key (constant-time comparison against each)."""
        if presented is None:
            return False
        return any([hmac.compare_digest(k.encode(), presented.encode()) for k in self.admin_keys])

    @property
    def multi(self) -> bool:
        """More than one tenant: namespaces, salts and budgets are per tenant."""
        return len(self.keys) > 1

    def authenticate(self, presented: str | None) -> tuple[bool, str | None]:
        """``(accepted, tenant)`` for a presented key (constant-time comparison against each key)."""
        if presented is None:
            return False, None
        found: tuple[bool, str | None] = (False, None)
        for key, tenant in self.keys.items():
            if hmac.compare_digest(key.encode(), presented.encode()):
                found = (True, tenant)
        return found


def load_keys_file(path: str | Path) -> tuple[list[str], dict[str, str]]:
    """API keys of a file and the tenant each names: one key a line, optionally followed by a tenant
    name (``KEY TENANT``: the keys naming one tenant are that one tenant); blank lines and ``#``
    comments skipped. ValueError if unusable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the API keys file {path}: {exc}") from exc
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"the API keys file {path} holds no key")
    if any(len(fields) > 2 for fields in lines):
        raise ValueError(f"the API keys file {path} has a line with more than a key and a tenant name")
    return [f[0] for f in lines], {f[0]: f[1] for f in lines if len(f) == 2}


def _tenant_name(secret: str) -> str:
    return "t-" + hashlib.sha256(secret.encode()).hexdigest()[:12]


def tenant_of_scope(scope: Scope) -> str | None:
    """The tenant ``AuthMiddleware`` put on this request (None: the default tenant)."""
    return (scope.get("state") or {}).get("tenant")


def metrics_viewer(scope: Scope, tenants: Tenants) -> tuple[bool, str | None]:
    """``(sees_all, tenant)`` for a ``/metrics`` scrape: an admin key, a server with one tenant, or open
    metrics without a key see every series; a tenant's key sees only its own."""
    state = scope.get("state") or {}
    if state.get("admin") or not tenants.multi or "tenant" not in state:
        return True, None
    return False, state["tenant"]


class AuthSettings(Protocol):
    """What the auth middleware reads of the server's state, per request (``ServerState``)."""

    tenants: Tenants
    open_metrics: bool


class AuthMiddleware:
    """Key check and tenant assignment per request; reads ``state.tenants`` and ``state.open_metrics``
    each time (tests change them at runtime)."""

    def __init__(self, app: ASGIApp, state: AuthSettings) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        tenants: Tenants = self.state.tenants
        if tenants.required and self._protected(path):
            presented = _presented_key(scope)
            accepted, tenant = tenants.authenticate(presented)
            admin = not accepted and not path.startswith("/v1") and tenants.is_admin(presented)
            if not (accepted or admin):
                await _unauthorized(path)(scope, receive, send)
                return
            scope.setdefault("state", {}).update(tenant=tenant, admin=admin)
        await self.app(scope, receive, send)

    def _protected(self, path: str) -> bool:
        if path.startswith("/v1/") or path == "/v1":
            return True
        return not self.state.open_metrics and (path == "/metrics" or path in DOC_PATHS)


def _presented_key(scope: Scope) -> str | None:
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    key = headers.get(b"x-api-key")
    return key.decode("latin-1").strip() if key else None


def _unauthorized(path: str) -> JSONResponse:
    message = "invalid or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')"
    if path.startswith(_ANTHROPIC_PREFIX):
        body = {"type": "error", "error": {"type": "authentication_error", "message": message}}
        return JSONResponse(body, status_code=401)
    return JSONResponse(APIError(401, message, code="invalid_api_key").body(), status_code=401)
