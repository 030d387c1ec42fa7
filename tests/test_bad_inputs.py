"""Every hostile or careless request of the catalogue gets a 4xx with the API's error body from a real
server, while a request running beside them finishes untouched."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from server_fixtures import build_engine, start_thread_server

from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.server_config import ServerConfig
from benchmarks.bad_inputs import BAD_INPUTS, send_bad_input

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def srv():
    config = ServerConfig(drain_timeout=2.0, log_level="warning", max_body_bytes=1 << 20)
    server = start_thread_server(AsyncEngine(build_engine()), config)
    yield server
    server.stop()


def test_every_bad_input_is_a_4xx_and_harms_no_other_request(srv):
    async def run() -> tuple[dict[str, str], httpx.Response]:
        async with httpx.AsyncClient(base_url=srv.base_url) as client:
            good = asyncio.ensure_future(client.post("/v1/completions", timeout=120, json={
                "prompt": "a request beside the bad ones", "max_tokens": 24, "ignore_eos": True}))
            verdicts = {name: await send_bad_input(client, name) for name in BAD_INPUTS}
            return verdicts, await good

    verdicts, good = asyncio.run(run())
    assert {k: v for k, v in verdicts.items() if v != "4xx"} == {}
    assert good.status_code == 200 and good.json()["choices"][0]["finish_reason"] == "length"
    assert srv.wait_idle().scheduler.blocks_in_use == 0


def test_the_413_and_the_unicode_error_say_what_is_wrong(srv):
    big = httpx.post(srv.base_url + "/v1/completions", content=b'{"prompt": "' + b"x" * (2 << 20) + b'"}',
                     headers={"content-type": "application/json"}, timeout=60)
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    bad = httpx.post(srv.base_url + "/v1/chat/completions", timeout=60, headers={"content-type": "application/json"},
                     content=b'{"messages": [{"role": "user", "content": "hi \\udc80"}], "max_tokens": 2}')
    assert bad.status_code == 400 and "not valid Unicode" in bad.json()["error"]["message"]
