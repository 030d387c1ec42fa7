"""The cluster's Ray-free parts: the in-process ASGI bridge, the request's route key, the merged metrics."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent_engine.cluster.bridge import ProxiedRequest, ResponseStart, collect, stream_asgi
from agent_engine.cluster.cluster_metrics import ClusterMetrics, merge_expositions
from agent_engine.cluster.route_key import prompt_text, route_key
from agent_engine.routing import text_chain

pytestmark = pytest.mark.core


class _App:
    """A raw ASGI app: echoes the body in two chunks, or streams until the client goes away."""

    def __init__(self) -> None:
        self.saw_disconnect = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        msg = await receive()
        body = msg["body"]
        if scope["path"] == "/boom":
            raise RuntimeError("broken")
        headers = [(b"x-path", scope["path"].encode())]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        if scope["path"] == "/forever":
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            if (await receive())["type"] == "http.disconnect":
                self.saw_disconnect.set()
            return
        await send({"type": "http.response.body", "body": body[:3], "more_body": True})
        await send({"type": "http.response.body", "body": body[3:], "more_body": False})


def test_bridge_yields_the_start_then_the_body() -> None:
    start, body = asyncio.run(collect(_App(), ProxiedRequest("POST", "/echo", body=b"hello world")))
    assert start.status == 201 and start.header("x-path") == "/echo"
    assert body == b"hello world"


def test_bridge_turns_an_app_failure_into_a_500_error_body() -> None:
    start, body = asyncio.run(collect(_App(), ProxiedRequest("GET", "/boom")))
    assert start.status == 500
    assert json.loads(body)["error"]["code"] == "replica_error"


def test_closing_the_stream_disconnects_the_app() -> None:
    app = _App()

    async def run() -> list[object]:
        got: list[object] = []
        gen = stream_asgi(app, ProxiedRequest("GET", "/forever"))
        async for item in gen:
            got.append(item)
            if item == b"first":
                break
        await gen.aclose()
        await asyncio.wait_for(app.saw_disconnect.wait(), 2.0)
        return got

    got = asyncio.run(run())
    assert isinstance(got[0], ResponseStart) and got[1] == b"first"
    assert app.saw_disconnect.is_set()


def test_route_key_reads_the_servers_hints_and_the_prompt_chain() -> None:
    messages = [{"role": "system", "content": "s" * 300}, {"role": "user", "content": "u" * 300}]
    body = json.dumps({"messages": messages, "session_id": "sess-1"}).encode()
    key = route_key(body, {"x-job-id": "header-job"})
    assert key.job_id == "sess-1"  # the body's session_id wins over the header (server.hints' precedence)
    assert key.prefix == text_chain(prompt_text(json.loads(body)))
    assert route_key(json.dumps({"messages": messages}).encode(), {"x-session-id": "h"}).job_id == "h"
    extended = json.dumps({"messages": [*messages, {"role": "assistant", "content": "a" * 300}]}).encode()
    assert route_key(extended, {}).prefix[: len(key.prefix)] == key.prefix  # the next turn extends the chain


def test_route_key_is_total_on_bad_input() -> None:
    for body in (b"", b"not json", b"[1, 2]", json.dumps({"job_id": 7, "prompt": "x" * 600}).encode()):
        key = route_key(body, {})
        assert key.job_id is None
    assert route_key(json.dumps({"job_id": 7, "prompt": "x" * 600}).encode(), {}).prefix  # still a prefix


def test_prompt_text_covers_completions_chat_and_anthropic_messages() -> None:
    assert prompt_text({"prompt": "abc"}) == "abc"
    assert prompt_text({"prompt": [1, 2, 3]}) == "1,2,3"
    assert prompt_text({"prompt": ["first", "second"]}) == "first"
    anthropic = {"system": [{"type": "text", "text": "be brief"}],
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert prompt_text(anthropic) == "<system>be brief\n<user>hi\n"
    assert prompt_text({"messages": "nope"}) == ""


_REPLICA = """# HELP agent_engine_preemptions_total Requests preempted
# TYPE agent_engine_preemptions_total counter
agent_engine_preemptions_total {n}
# HELP agent_engine_pin_hits_by_hint_total Turns admitted onto their pin
# TYPE agent_engine_pin_hits_by_hint_total counter
agent_engine_pin_hits_by_hint_total{{hint_source="job_id"}} {n}
"""


def test_metrics_are_merged_with_a_replica_label() -> None:
    fams = {f.name: f for f in merge_expositions({"r1": _REPLICA.format(n=1), "r2": _REPLICA.format(n=2)})}
    hits = fams["agent_engine_pin_hits_by_hint"].samples
    assert {(s.labels["replica"], s.labels["hint_source"], s.value) for s in hits} == {
        ("r1", "job_id", 1.0), ("r2", "job_id", 2.0)}
    text = ClusterMetrics(lambda: ({"affinity": 3}, 2)).render({"r1": _REPLICA.format(n=1)}).decode()
    parsed = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert parsed["agent_engine_router_decisions_total"].labels == {"decision": "affinity"}
    assert parsed["agent_engine_cluster_replicas"].value == 2.0
    assert parsed["agent_engine_preemptions_total"].labels == {"replica": "r1"}


def test_serve_replicas_without_ray_is_a_clean_error(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from agent_engine.cluster import serve_cluster as cluster_serve
    from agent_engine.server.serve import add_arguments, run_serve

    monkeypatch.setattr(cluster_serve, "ray_available", lambda: False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run_serve(parser.parse_args(["--replicas", "2"])) == 2
    assert "needs Ray Serve" in capsys.readouterr().err


def test_the_single_server_and_the_routing_never_import_ray() -> None:
    import subprocess
    import sys

    code = ("import sys, agent_engine.server.serve, agent_engine.routing, agent_engine.sim.cli, "
            "agent_engine.cluster.route_key, agent_engine.cluster.bridge; assert 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
