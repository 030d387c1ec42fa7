"""Tenants on a real server: one key each; jobs in their own namespace, prefix caches walled off unless
shared, observations in their own estimator."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from server_fixtures import build_engine, start_thread_server

from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.server_config import ServerConfig

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

A, B = {"Authorization": "Bearer key-a"}, {"x-api-key": "key-b"}
PROMPT = "the same long shared prompt of a tenant " * 12


def _server(share: bool):
    config = ServerConfig(api_keys=("key-a", "key-b"), drain_timeout=2.0, log_level="warning",
                          share_prefix_cache=share, admin_keys=("key-admin",))
    engine = build_engine(policy="continuum", ttl_policy="fixed", pin_threshold=60.0)
    return start_thread_server(AsyncEngine(engine), config)


def _cached(srv, headers: dict, **extra) -> int:
    r = httpx.post(srv.base_url + "/v1/completions", headers=headers, timeout=60,
                   json={"prompt": PROMPT, "max_tokens": 2, **extra})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.fixture(scope="module")
def walled():
    srv = _server(share=False)
    yield srv
    srv.stop()


def test_prefix_caches_are_walled_off_between_tenants(walled):
    assert _cached(walled, A) == 0
    assert _cached(walled, A) > 0  # the tenant's own prefix is reused
    assert _cached(walled, B) == 0  # the other tenant's is not (no timing side channel either)


def test_jobs_live_in_the_tenant_namespace(walled):
    turn = {"prompt": PROMPT + " job turn", "max_tokens": 2, "job_id": "shared-name", "tool_name": "bash:ls"}
    for headers in (A, B):
        assert httpx.post(walled.base_url + "/v1/completions", headers=headers, json=turn, timeout=60).status_code == 200
    pinned = asyncio.run(walled.async_engine.routing_stats()).leases  # the jobs holding a lease
    # Two jobs, though both tenants named theirs the same.
    assert len([j for j in pinned if j.endswith("/shared-name")]) == 2
    url = walled.base_url + "/v1/jobs/shared-name"
    assert httpx.delete(url, headers=A, timeout=30).json()["released_pin"] is True
    assert httpx.delete(url, headers=A, timeout=30).status_code == 404  # A's is over
    assert httpx.delete(url, headers=B, timeout=30).json()["released_pin"] is True  # B's was untouched
    assert httpx.delete(walled.base_url + "/v1/jobs/never-seen", headers=B, timeout=30).status_code == 404
    assert walled.engine.job_hooks.stats()["estimator_tenants"] == 2


def test_metrics_need_a_key_and_show_a_tenant_its_own_series(walled):
    assert httpx.get(walled.base_url + "/metrics", timeout=30).status_code == 401
    assert _cached(walled, A) >= 0 and _cached(walled, B) >= 0  # both tenants have traffic
    text = httpx.get(walled.base_url + "/metrics", headers=B, timeout=30).text
    tenants = set(re.findall(r'tenant="([^"]+)"', text))
    assert len(tenants) == 1 and "agent_engine_prompt_tokens_total" in text  # B's own, nobody else's
    assert "agent_engine_requests_running" not in text and "shared-name" not in text and "key-" not in text
    admin = httpx.get(walled.base_url + "/metrics", headers={"Authorization": "Bearer key-admin"}, timeout=30)
    assert "agent_engine_requests_running" in admin.text and len(set(re.findall(r'tenant="(t-[^"]+)"', admin.text))) == 2
    assert httpx.post(walled.base_url + "/v1/completions", headers={"Authorization": "Bearer key-admin"},
                      json={"prompt": "x", "max_tokens": 1}, timeout=30).status_code == 401  # not a tenant


def test_shared_prefix_cache_when_configured():
    srv = _server(share=True)
    try:
        assert _cached(srv, A) == 0
        assert _cached(srv, B) > 0
    finally:
        srv.stop()
