"""API keys and tenants at the edge: which paths need a key, which tenant a key is, error shapes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from agent_engine.server.auth import AuthMiddleware, Tenants, load_keys_file, tenant_of_scope
from agent_engine.server.metrics import HttpCounterMiddleware, ServerMetrics

pytestmark = pytest.mark.core


@dataclass
class _State:
    tenants: Tenants
    open_metrics: bool = False


def _client(keys: list[str], open_metrics: bool = False) -> tuple[TestClient, ServerMetrics]:
    app = FastAPI()

    @app.get("/v1/whoami")
    async def whoami(request: Request) -> dict:
        return {"tenant": tenant_of_scope(request.scope)}

    @app.post("/v1/messages")
    async def messages() -> dict:
        return {}

    @app.get("/metrics")
    async def metrics_route() -> dict:
        return {}

    @app.get("/health")
    async def health() -> dict:
        return {}

    metrics = ServerMetrics()
    app.add_middleware(AuthMiddleware, state=_State(Tenants.from_keys(keys), open_metrics))
    app.add_middleware(HttpCounterMiddleware, metrics=metrics)
    return TestClient(app), metrics


def test_one_key_is_the_default_tenant_and_several_keys_are_tenants():
    assert Tenants.from_keys(["k"]).keys == {"k": None} and not Tenants.from_keys(["k"]).multi
    many = Tenants.from_keys(["k1", "k2", "k1"])
    assert many.multi and len(set(many.keys.values())) == 2
    assert all(t.startswith("t-") and "k1" not in t for t in many.keys.values())
    assert many.authenticate("k2") == (True, many.keys["k2"]) and many.authenticate("nope") == (False, None)
    assert not Tenants.from_keys([]).required


def test_paths_need_a_key_and_requests_carry_their_tenant():
    client, metrics = _client(["alpha", "beta"])
    assert client.get("/health").status_code == 200
    assert client.get("/v1/whoami").status_code == 401
    assert client.get("/metrics").status_code == 401
    assert client.get("/openapi.json").status_code == 401
    alpha = client.get("/v1/whoami", headers={"Authorization": "Bearer alpha"}).json()["tenant"]
    beta = client.get("/v1/whoami", headers={"x-api-key": "beta"}).json()["tenant"]
    assert alpha and beta and alpha != beta
    err = client.get("/v1/whoami", headers={"Authorization": "Bearer wrong"}).json()
    assert err["error"]["code"] == "invalid_api_key"
    anthropic = client.post("/v1/messages", headers={"x-api-key": "wrong"})
    assert anthropic.status_code == 401 and anthropic.json()["error"]["type"] == "authentication_error"
    text = metrics.render(None).decode()
    assert f'route="/v1/whoami",status="2xx",tenant="{alpha}"}} 1.0' in text
    assert f'route="/v1/whoami",status="2xx",tenant="{beta}"}} 1.0' in text
    assert 'route="other",status="4xx",tenant="default"} 5.0' in text  # refused before routing or a tenant


def test_open_metrics_and_no_keys():
    client, _ = _client(["alpha"], open_metrics=True)
    assert client.get("/metrics").status_code == 200 and client.get("/v1/whoami").status_code == 401
    open_client, _ = _client([])
    assert open_client.get("/v1/whoami").json() == {"tenant": None}


def test_keys_file(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# team keys\nalpha\n\n  beta  \n")
    assert load_keys_file(f) == (["alpha", "beta"], {})
    f.write_text("alpha team-a\nbeta team-a\ngamma\n")
    keys, named = load_keys_file(f)
    assert (keys, named) == (["alpha", "beta", "gamma"], {"alpha": "team-a", "beta": "team-a"})
    tenants = Tenants.from_keys(keys, named=named)
    assert tenants.keys["alpha"] == tenants.keys["beta"] != tenants.keys["gamma"]  # two keys, one tenant
    assert "team-a" not in str(tenants.keys["alpha"]) and "alpha" not in str(tenants.keys["alpha"])
    f.write_text("alpha team-a extra\n")
    with pytest.raises(ValueError, match="more than a key and a tenant"):
        load_keys_file(f)
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ValueError, match="holds no key"):
        load_keys_file(tmp_path / "empty")
    with pytest.raises(ValueError, match="cannot read"):
        load_keys_file(tmp_path / "missing")
