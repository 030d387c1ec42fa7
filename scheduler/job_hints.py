"""``JobHints``: what a client said about a request's agent job, as one frozen value.

Built once at the server's edge (``agent_engine.server.hints``) or by the caller of the Python API,
carried whole through the engine to the ``Request`` and read there by the policy and the estimator.
Nothing between the edge and the ``Request`` unpacks it into keywords.

Invariants:
- ``tool_ttl_hint`` is None or a finite number of seconds >= 0; ``priority`` is an int (not a bool);
  ``job_id`` is None or a non-empty string (else ``ValueError`` at construction).
- ``hint_source`` names where ``job_id`` came from: a client convention (see the server's hint
  table), ``"inferred"`` when the engine gave the job from the prefix chain, ``"none"`` without a job.
- ``tenant_job_id`` is the only function that puts a job id in a tenant's namespace: ``scoped`` uses
  it for a request's hints (and, unless tenants share cached prefixes, salts its blocks with the
  tenant), and the server's job release uses it for the id a client names, so both reach the same
  job record and no tenant's request ever hits another tenant's blocks or names another tenant's job.
- The engine's job id is a key, never parsed: whose job it is travels as its own field (``tenant``
  here, ``Request.tenant``, ``JobRecord.tenant``), and whoever needs the tenant reads that field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["INFERRED", "NO_HINTS", "JobHints", "tenant_job_id"]

INFERRED = "inferred"


def tenant_job_id(tenant: str | None, job_id: str) -> str:
    """The engine's id of ``tenant``'s job ``job_id`` (the default tenant, None: the id unchanged):
    tenants never see (or release) each other's jobs."""
    return job_id if tenant is None else f"{tenant}/{job_id}"


@dataclass(frozen=True, slots=True)
class JobHints:
    """A request's job and scheduling hints (all optional; the defaults mean "nothing said").

    ``tenant`` is whose pin budget and estimator the job uses (None: the default tenant);
    ``is_last_step`` says the turn ends its job (nothing is pinned after it); ``priority`` orders the
    priority policy (lower first); ``cache_salt`` walls the request's cached blocks off; ``tool_name``
    names the tool the turn's output calls (wins over parsing the text); ``tool_ttl_hint`` caps the pin's
    time-to-live in seconds. ``confirmed`` marks an inferred job whose turns have continued it, output
    included, at least ``CONFIRMED_JOINS`` times: the prefix chain has vouched for it as often as a
    client's id would have, so its turns are pinned like a declared job's.
    """

    job_id: str | None = None
    hint_source: str = "none"
    tenant: str | None = None
    is_last_step: bool = False
    priority: int = 0
    cache_salt: str | None = None
    tool_name: str | None = None
    tool_ttl_hint: float | None = None
    confirmed: bool = False

    def __post_init__(self) -> None:
        if self.job_id is not None and (not isinstance(self.job_id, str) or not self.job_id):
            raise ValueError("job_id must be a non-empty string")
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise ValueError(f"priority must be an int, got {type(self.priority).__name__}")
        ttl = self.tool_ttl_hint
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)
                                or not math.isfinite(ttl) or ttl < 0):
            raise ValueError("tool_ttl_hint must be a finite number of seconds >= 0")

    @classmethod
    def for_job(cls, job_id: str | None, **hints: object) -> JobHints:
        """Hints naming ``job_id`` declared by the caller (``hint_source`` "job_id" unless given)."""
        source = hints.pop("hint_source", "none" if job_id is None else "job_id")
        return cls(job_id=job_id, hint_source=source, **hints)  # type: ignore[arg-type]

    def scoped(self, share_prefix_cache: bool = False) -> JobHints:
        """These hints as the engine keys them: the job id through ``tenant_job_id`` and, for a tenant
        (not the default one) unless ``share_prefix_cache``, the tenant in the cache salt. Without a
        tenant, equal to these hints."""
        job_id = None if self.job_id is None else tenant_job_id(self.tenant, self.job_id)
        walled = self.tenant is not None and not share_prefix_cache
        salt = f"{self.tenant}\x1f{self.cache_salt or ''}" if walled else self.cache_salt
        return replace(self, job_id=job_id, cache_salt=salt)

    def inferred(self, job_id: str, confirmed: bool = False) -> JobHints:
        """These hints with a job the engine inferred from the prefix chain (``confirmed``: see above)."""
        return replace(self, job_id=job_id, hint_source=INFERRED, confirmed=confirmed)


NO_HINTS = JobHints()
