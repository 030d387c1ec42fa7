"""End to end on a local Ray cluster: ``agent-engine serve --replicas 2`` with the embedded model.

One server for the module (Ray's start-up is slow on 2 cores), listening on 127.0.0.1:
- two jobs' turns: each job's later turns hit its pins on one replica (read from the merged,
  replica-labelled ``/metrics``), hints are echoed, errors and streams pass through;
- a replica killed in the middle of load: no non-streamed turn is lost (retried on the other
  replica), its jobs move (lost leases counted), and Ray's replacement replica rejoins.

Skips when Ray Serve is not installed (the optional extra ``ray``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'agent-engine[ray]')")

from agent_engine.server.launcher import ServerProcess, parse_prometheus, start_engine_server  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ENGINE_ARGS = ["--replicas", "2", "--router", "affinity", "--routing-stats-period", "0.5",
               "--num-kv-blocks", "256", "--max-model-len", "1024", "--max-num-seqs", "16",
               "--policy", "continuum", "--ttl-policy", "fixed", "--pin-threshold", "120",
               "--no-profile-reload-cost", "--drain-timeout", "2"]


def _samples(text: str, name: str, label: str = "") -> dict[str, float]:
    """``replica -> value`` of one metric's samples that carry ``label`` (e.g. 'hint_source="job_id"')."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{") and 'replica="' in line and label in line:
            replica = line.split('replica="', 1)[1].split('"', 1)[0]
            out[replica] = out.get(replica, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _view(srv: ServerProcess) -> dict[str, Any]:
    return httpx.get(srv.base_url + "/cluster/replicas", timeout=10).json()["routers"][0]


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def _replicas_reporting(srv: ServerProcess, n: int) -> bool:
    try:
        reps = _view(srv)["replicas"]
    except (httpx.HTTPError, IndexError, KeyError, ValueError):
        return False
    return len(reps) == n and all(r.get("pid") for r in reps.values())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = Path(tmp_path_factory.mktemp("cluster")) / "serve.log"
    with start_engine_server(ENGINE_ARGS, log, name="cluster", startup_timeout=240, new_session=True) as srv:
        httpx.post(srv.base_url + "/v1/completions", json={"prompt": "warm up", "max_tokens": 1}, timeout=60)
        _wait_for(lambda: _replicas_reporting(srv, 2), 60, "both replicas' routing stats")
        yield srv


def _turns(base: str, job: str, n: int, stream_last: bool = False, tokens: int = 12) -> list[dict[str, Any]]:
    """``n`` chat turns of one job, each prompt extending the last (context + answer + tool output)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task for {job}: " + "fix the bug " * 20}]
    usages = []
    with httpx.Client(timeout=120) as c:
        for t in range(n):
            body = {"messages": messages, "max_tokens": tokens, "ignore_eos": True, "job_id": job,
                    "tool_name": "bash", "is_last_step": False}
            if stream_last and t == n - 1:
                streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
                text, usage = _stream(c, base, streamed)
            else:
                r = c.post(base + "/v1/chat/completions", json=body)
                assert r.status_code == 200, r.text
                data = r.json()
                assert data["job_id"] == job
                text, usage = data["choices"][0]["message"]["content"], data["usage"]
            usages.append(usage)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"output {t}"}]
    return usages


def _stream(c: httpx.Client, base: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    text, usage = "", {}
    with c.stream("POST", base + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                assert "error" not in chunk, chunk
                for ch in chunk["choices"]:
                    text += ch["delta"].get("content", "")
                usage = chunk.get("usage") or usage
    return text, usage


def test_each_jobs_later_turns_hit_its_pins_on_one_replica(cluster: ServerProcess) -> None:
    base = cluster.base_url
    with ThreadPoolExecutor(2) as ex:
        usages = list(ex.map(lambda j: _turns(base, j, 3, stream_last=(j == "job-b")), ["job-a", "job-b"]))
    for u in usages:
        assert u[0]["prompt_tokens_details"]["cached_tokens"] == 0
        assert all(x["prompt_tokens_details"]["cached_tokens"] > 0 for x in u[1:]), u
    m = httpx.get(base + "/metrics", timeout=30).text
    turns = _samples(m, "agent_engine_job_turns_by_hint_total", 'hint_source="job_id"')
    hits = _samples(m, "agent_engine_pin_hits_by_hint_total", 'hint_source="job_id"')
    assert sum(turns.values()) == 6 and sum(hits.values()) == 4
    for replica, n in turns.items():  # every replica served whole jobs, and hit the pin on each later turn
        assert n % 3 == 0 and hits.get(replica, 0) == n * 2 / 3, (turns, hits)
    assert parse_prometheus(m)["agent_engine_router_decisions_total"] >= 6
    assert 'agent_engine_router_decisions_total{decision="affinity"} 4.0' in m
    bad = httpx.post(base + "/v1/chat/completions", json={"messages": [], "job_id": 5}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    released = httpx.delete(base + "/v1/jobs/job-a", timeout=30).json()
    assert released == {"id": "job-a", "object": "job", "deleted": True, "released_pin": True}


def test_a_replica_killed_under_load_loses_nothing_and_rejoins(cluster: ServerProcess) -> None:
    base = cluster.base_url
    jobs = [f"load-{i}" for i in range(6)]
    with ThreadPoolExecutor(len(jobs)) as ex:
        futures = [ex.submit(_turns, base, j, 5, False, 24) for j in jobs]
        deadline = time.monotonic() + 60
        while True:  # a victim that holds leases or work, so the fault has something to lose
            reps = _view(cluster)["replicas"]
            victim_id, victim = max(reps.items(), key=lambda kv: (kv[1]["leases"], kv[1]["queue_len"]))
            if victim["leases"] or victim["queue_len"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        os.kill(int(victim["pid"]), signal.SIGKILL)
        results = [f.result(timeout=240) for f in futures]  # raises if any turn failed
    assert all(len(u) == 5 for u in results)
    counters = _view(cluster)["counters"]
    m = parse_prometheus(httpx.get(base + "/metrics", timeout=30).text)
    assert counters["lost_leases"] + m["agent_engine_cluster_retries_total"] >= 1, (counters, m)
    _wait_for(lambda: _replicas_reporting(cluster, 2) and victim_id not in _view(cluster)["replicas"],
              150, "Ray's replacement replica")
    health = httpx.get(base + "/health", timeout=30).json()
    assert health == {"status": "ok", "replicas": 2, "of": 2}
    assert len(_turns(base, "after-restart", 2)) == 2


def test_sigterm_to_the_process_group_drains_and_exits_zero(cluster: ServerProcess) -> None:
    """What systemd and a container's init do: SIGTERM to every process of the group. The stream in
    flight ends whole and the command exits 0 (Ray's processes run in a session of their own)."""
    body = {"prompt": "a long answer " * 4, "max_tokens": 200, "ignore_eos": True, "stream": True}
    lines: list[str] = []
    with httpx.Client(timeout=120) as c, c.stream("POST", cluster.base_url + "/v1/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line:
                continue
            lines.append(line)
            if len(lines) == 3:  # the stream is under way: stop the whole group
                os.killpg(cluster.proc.pid, signal.SIGTERM)
    assert lines[-1] == "data: [DONE]", lines[-3:]
    finishes = [json.loads(x[6:])["choices"][0].get("finish_reason") for x in lines if x.startswith("data: {")]
    assert finishes[-1] in ("length", "abort"), finishes[-3:]
    assert cluster.proc.wait(90) == 0, cluster.log_tail()
