"""A tenant's bound on open agent jobs (``server.open_jobs``, ``--tenant-max-open-jobs``): the table on a
fake clock, then over HTTP on ``FakeEngine`` with two keys: a tenant that opens jobs past its bound
(``is_last_step: false`` each) gets a 429 in the API's error shape, its open jobs' turns still pass,
a final turn, a release or idleness frees a place, and the other tenant is never refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_fixtures import FakeEngine, ThreadServer, start_thread_server

from agent_engine.server import AsyncEngine
from agent_engine.server.open_jobs import IDLE_S, OpenJobs, TooManyOpenJobs
from agent_engine.server.server_config import ServerConfig

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]

CAP = 3
A, B = {"Authorization": "Bearer key-a"}, {"x-api-key": "key-b"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _turn(jobs: OpenJobs, tenant: str | None, job: str | None, last: bool = False) -> Any:
    jobs.check(tenant, job, last)
    return jobs.turn_started(tenant, job, last)


def test_the_bound_counts_open_jobs_per_tenant_and_lets_their_turns_through() -> None:
    clock = Clock()
    jobs = OpenJobs(2, idle_s=10.0, clock=clock)
    _turn(jobs, "a", "j1")()
    _turn(jobs, "a", "j2")()
    assert jobs.count("a") == 2
    with pytest.raises(TooManyOpenJobs, match="2 agent jobs open") as exc:
        jobs.check("a", "j3", False)
    assert exc.value.retry_after == 10.0
    _turn(jobs, "a", "j1")()  # an open job's next turn always passes
    _turn(jobs, "b", "j3")()  # another tenant has its own bound
    assert _turn(jobs, "a", None) is None  # no job id: nothing opens
    assert _turn(jobs, "a", "one-shot", last=True) is None  # a job of one turn never opens
    end = _turn(jobs, "a", "j2", last=True)  # j2's final turn, in flight: still open
    assert jobs.count("a") == 2
    end()
    assert jobs.count("a") == 1
    _turn(jobs, "a", "j4")
    jobs.release("a", "j4")  # released while its turn runs: no longer counted
    assert jobs.count("a") == 1
    running = _turn(jobs, "a", "j5")
    clock.now += 10.0  # j1 idle for its 10 s: it stops counting; j5 is in flight and stays
    assert jobs.count("a") == 1
    _turn(jobs, "a", "j6")()
    with pytest.raises(TooManyOpenJobs):
        jobs.check("a", "j7", False)
    running()
    assert OpenJobs(None).turn_started("a", "j", False) is None  # no bound: nothing kept
    with pytest.raises(ValueError):
        OpenJobs(0)


@pytest.fixture(scope="module")
def srv() -> Iterator[ThreadServer]:
    config = ServerConfig(api_keys=("key-a", "key-b"), tenant_max_open_jobs=CAP, drain_timeout=2.0,
                          log_level="warning")
    server = start_thread_server(AsyncEngine(FakeEngine()), config)
    yield server
    server.stop()


def _chat(srv: ThreadServer, headers: dict[str, str], job: str, last: bool = False) -> httpx.Response:
    return httpx.post(srv.base_url + "/v1/chat/completions", headers=headers, timeout=30,
                      json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "job_id": job,
                            "is_last_step": last})


def test_a_tenant_opening_jobs_past_its_bound_gets_429_and_the_other_tenant_does_not(
        srv: ThreadServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(CAP):
        assert _chat(srv, A, f"flood-{i}").status_code == 200
    r = _chat(srv, A, "flood-new")
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err["code"] == "rate_limit_exceeded" and err["type"] == "rate_limit_exceeded"
    assert "--tenant-max-open-jobs" in err["message"] and int(r.headers["Retry-After"]) >= 1
    r = httpx.post(srv.base_url + "/v1/messages", headers=A, timeout=30,
                   json={"model": FakeEngine.model_name, "max_tokens": 2, "job_id": "flood-anthropic",
                         "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 429 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert _chat(srv, A, "flood-0").status_code == 200  # a turn of an open job
    assert _chat(srv, A, "single", last=True).status_code == 200  # a one-turn job opens nothing
    assert _chat(srv, B, "victim-job").status_code == 200  # the other tenant keeps its places
    assert _chat(srv, A, "flood-1", last=True).status_code == 200  # ends flood-1: one place back
    assert _chat(srv, A, "flood-new").status_code == 200
    assert _chat(srv, A, "flood-next").status_code == 429
    assert httpx.delete(srv.base_url + "/v1/jobs/flood-2", headers=A, timeout=30).status_code == 200
    assert _chat(srv, A, "flood-next").status_code == 200  # the released job's place
    assert _chat(srv, A, "flood-last").status_code == 429
    later = srv.state.open_jobs.clock() + IDLE_S
    monkeypatch.setattr(srv.state.open_jobs, "clock", lambda: later)  # every job idle for IDLE_S
    assert _chat(srv, A, "after-idle").status_code == 200


def test_the_default_bound_is_the_running_seats_with_several_keys() -> None:
    from agent_engine.server.app import build_app

    engine = AsyncEngine(FakeEngine())
    several = build_app(engine, ServerConfig(api_keys=("k1", "k2"))).state.server.open_jobs
    assert several.cap == FakeEngine().config.max_num_seqs
    assert build_app(engine, ServerConfig(api_keys=("k1",))).state.server.open_jobs.cap is None
    assert build_app(engine, ServerConfig(api_keys=("k1", "k2"), tenant_max_open_jobs=7)).state.server.open_jobs.cap == 7
    with pytest.raises(ValueError, match="tenant_max_open_jobs"):
        ServerConfig(tenant_max_open_jobs=0)
