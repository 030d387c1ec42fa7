"""The hostile-tenant phase of ``bench reliability``: does one tenant's abuse cost another tenant anything?

One server, two API keys. The victim runs agent jobs (turns that extend their own prompt, streamed, so
time to first token is measured per turn), first alone (the quiet run), then while the attacker, with a
valid key of its own, sends every probe of ``probes()`` round-robin from several connections: floods past
its in-flight share, a 20,000-prompt batch, 10 MB prompts and token counts, a 5,000-deep session id,
900-deep message extras, a 1 MB ``tool_name``, unread streams, connections that never finish their
headers or trickle their bodies, unsupported fields, a wrong Content-Type, guessed job ids, output
formats that are costly to compile or admit no output (``grammar_probes``: 5,000 and 1,000 optional
properties, a 2,000-string enum, a 50,000-alternative regex, a ``$ref`` cycle, a regex and a grammar
that match nothing, a strict schema with ``not``), and the catalogue of bad inputs
(``bad_inputs.BAD_INPUTS``).

Reported: the victim's p50/p99 TTFT and mean JCT in both runs and their ratio, the victim's lost
requests (anything but a completed answer), the attacker's answers by status (a 5xx is a violation),
and the server's resident memory before the attack and after it (the attack's requests done, the
server idle again). Verdict (a benchmark target, never a timed test): the victim's p99 TTFT within
``TTFT_P99_LIMIT`` x its quiet run, nothing of the victim's lost, no 5xx, and the RSS back within
``RSS_LIMIT_MB`` of its start.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import socket
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from agent_engine.server.launcher import ServerProcess, start_engine_server
from benchmarks.bad_inputs import BAD_INPUTS

VICTIM, ATTACKER = "key-victim", "key-attacker"
TTFT_P99_LIMIT = 2.0
GRAMMAR_BUDGET_S = 3.0
RSS_LIMIT_MB = 50.0
_CMPL, _CHAT = "/v1/completions", "/v1/chat/completions"


def _deep(depth: int) -> dict[str, Any]:
    root = cur = {}
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return root


@functools.cache
def probes() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each probe's path and body (built on first use: two of them hold 10 MB of text)."""
    big = "word " * 2_000_000
    return {
        "flood": (_CMPL, {"prompt": "flood", "max_tokens": 64, "ignore_eos": True}),
        "prompt_list_20k": (_CMPL, {"prompt": ["hi"] * 20_000, "max_tokens": 2}),
        "prompt_10mb": (_CMPL, {"prompt": big, "max_tokens": 2}),
        "count_tokens_10mb": ("/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": big}]}),
        "user_id_5000_deep": (_CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                  "metadata": {"user_id": "{" + '"a":{' * 5000 + "}" * 5001}}),
        "message_extra_900_deep": (_CHAT, {"messages": [{"role": "user", "content": "hi", "x": _deep(900)}], "max_tokens": 2}),
        "tool_name_1mb": (_CMPL, {"prompt": "hi", "max_tokens": 2, "job_id": "j", "tool_name": "x" * 1_000_000}),
        "best_of": (_CMPL, {"prompt": "hi", "max_tokens": 2, "best_of": 3}),
        "temperature_tiny": (_CMPL, {"prompt": "hi", "max_tokens": 2, "temperature": 1e-38}),
        **grammar_probes(),
    }


def _schema_chat(schema: dict[str, Any], strict: bool = False) -> tuple[str, dict[str, Any]]:
    return (_CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "response_format": {
        "type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": strict}}})


def grammar_probes() -> dict[str, tuple[str, dict[str, Any]]]:
    """Output constraints that cost the server most to compile, or that admit no output: each must be
    a 400 (past the size cap or the compile budget, or refused) or an answer, never a stalled engine."""
    def optional(n: int) -> dict[str, Any]:
        return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}

    cycle = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    return {
        "schema_5000_optional": _schema_chat(optional(5000)),  # past --max-grammar-size
        "schema_1000_optional": _schema_chat(optional(1000)),  # past --grammar-compile-timeout (O(n^2))
        "enum_2000_long": _schema_chat({"enum": [f"{'value-' * 10}{i}" for i in range(2000)]}),
        "regex_50k_alternatives": (_CMPL, {"prompt": "hi", "max_tokens": 2, "structured_outputs": {
            "regex": "|".join(f"alt{i}" for i in range(50_000))}}),
        "schema_ref_cycle": _schema_chat(cycle),  # admits no output
        "regex_matches_nothing": (_CMPL, {"prompt": "hi", "max_tokens": 2,
                                          "structured_outputs": {"regex": r"[^\s\S]"}}),
        "grammar_root_root": (_CMPL, {"prompt": "hi", "max_tokens": 2,
                                      "structured_outputs": {"grammar": "root ::= root"}}),
        "strict_not": _schema_chat({"type": "integer", "not": {"const": 1}}, strict=True),
    }


def engine_args(model_args: list[str], tenant_max_requests: int) -> list[str]:
    """Server flags for the phase: two tenants, short header and body timeouts, a 3 s compile budget (so
    the attacker's 1,000-property schema is refused in seconds, not the default 10)."""
    return [*model_args, "--api-key", VICTIM, "--api-key", ATTACKER, "--tenant-max-requests",
            str(tenant_max_requests), "--header-timeout", "2", "--body-timeout", "3", "--drain-timeout", "2",
            "--grammar-compile-timeout", str(GRAMMAR_BUDGET_S)]


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _victim_turn(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, float | None, list[int]]:
    """One streamed turn: (outcome, TTFT seconds, output ids)."""
    start, ttft, ids, finish = time.perf_counter(), None, [], None
    try:
        async with client.stream("POST", _CMPL, json=body, headers={"Authorization": f"Bearer {VICTIM}"},
                                 timeout=httpx.Timeout(120)) as r:
            if r.status_code != 200:
                await r.aread()
                return f"status_{r.status_code}", None, []
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choice = (json.loads(line[6:]).get("choices") or [{}])[0]
                if ttft is None and choice.get("token_ids"):
                    ttft = time.perf_counter() - start
                ids += choice.get("token_ids") or []
                finish = choice.get("finish_reason") or finish
    except httpx.HTTPError as exc:
        return f"client_error:{type(exc).__name__}", None, []
    return ("completed" if finish in ("length", "stop") else f"finish_{finish}"), ttft, ids


async def victim_load(base_url: str, jobs: int, turns: int, seed: int) -> dict[str, Any]:
    """``jobs`` concurrent agent jobs of ``turns`` turns; TTFTs, JCTs and outcomes."""
    ttfts: list[float] = []
    jcts: list[float] = []
    outcomes: Counter[str] = Counter()

    async def job(j: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(f"{seed}-{j}")
        prompt = [rng.randrange(20, 2000) for _ in range(rng.randint(60, 160))]
        start = time.perf_counter()
        for t in range(turns):
            body = {"prompt": prompt, "max_tokens": 16, "temperature": 0.0, "ignore_eos": True, "stream": True,
                    "return_token_ids": True, "job_id": f"victim-{j}", "is_last_step": t == turns - 1}
            outcome, ttft, ids = await _victim_turn(client, body)
            outcomes[outcome] += 1
            if ttft is not None:
                ttfts.append(ttft)
            prompt = prompt + ids + [rng.randrange(20, 2000) for _ in range(rng.randint(10, 40))]
            await asyncio.sleep(rng.uniform(0.05, 0.3))  # the tool
        jcts.append(time.perf_counter() - start)

    async with httpx.AsyncClient(base_url=base_url) as client:
        await asyncio.gather(*(job(j, client) for j in range(jobs)))
    return {"ttft_p50_s": _quantile(ttfts, 0.5), "ttft_p99_s": _quantile(ttfts, 0.99),
            "jct_mean_s": statistics.fmean(jcts) if jcts else None, "outcomes": dict(outcomes),
            "turns": sum(outcomes.values())}


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Attacker:
    """Sends the probes round-robin on ``connections`` connections until stopped or ``max_requests``."""

    def __init__(self, base_url: str, max_requests: int, connections: int = 8) -> None:
        self.base_url, self.max_requests, self.connections = base_url, max_requests, connections
        self.model = "unknown"
        self._bodies: dict[str, tuple[str, bytes]] = {}
        self.answers: Counter[str] = Counter()
        self.sent = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {ATTACKER}"}
        async with httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(60)) as client:
            self.model = (await client.get("/v1/models")).json()["data"][0]["id"]
            held = [asyncio.ensure_future(self._unread_stream(client)) for _ in range(2)]
            sockets = [asyncio.ensure_future(self._slow_client(i)) for i in range(20)]
            await asyncio.gather(*(self._worker(client, w) for w in range(self.connections)))
            for task in held + sockets:
                task.cancel()
            await asyncio.gather(*held, *sockets, return_exceptions=True)

    async def _worker(self, client: httpx.AsyncClient, w: int) -> None:
        names = list(probes()) + [f"bad:{n}" for n in BAD_INPUTS] + ["content_type", "guess_job"]
        i = w
        while not self.stop.is_set() and self.sent < self.max_requests:
            self.sent += 1
            self.answers[await self._probe(client, names[i % len(names)])] += 1
            i += self.connections

    async def _probe(self, client: httpx.AsyncClient, name: str) -> str:
        try:
            if name.startswith("bad:"):
                path, body, extra = BAD_INPUTS[name[4:]]
                r = await client.post(path, content=body, headers={"content-type": "application/json", **extra})
            elif name == "content_type":
                r = await client.post(_CMPL, content=b'{"prompt": "x"}', headers={"content-type": "text/plain"})
            elif name == "guess_job":
                r = await client.delete(f"/v1/jobs/victim-{self.sent % 4}")
            else:
                path, body = self._encoded(name)
                r = await client.post(path, content=body, headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            return f"no_answer:{type(exc).__name__}"
        return f"{r.status_code // 100}xx" if r.status_code != 429 else "429"

    def _encoded(self, name: str) -> tuple[str, bytes]:
        """A probe's path and body, serialized once (the attacker's own CPU is not what is measured)."""
        if name not in self._bodies:
            path, body = probes()[name]
            self._bodies[name] = (path, json.dumps({**body, "model": self.model} if "model" in body else body).encode())
        return self._bodies[name]

    async def _unread_stream(self, client: httpx.AsyncClient) -> None:
        """A stream opened and never read (the server keeps generating into its buffer)."""
        body = {"prompt": "never read", "max_tokens": 400, "ignore_eos": True, "stream": True}
        async with client.stream("POST", _CMPL, json=body):
            await self.stop.wait()

    async def _slow_client(self, i: int) -> None:
        """A connection that sends its headers (or body) a few bytes at a time, forever."""
        host, port = self.base_url.rsplit("//", 1)[1].split(":")
        while not self.stop.is_set():
            with socket.create_connection((host, int(port))) as sock:
                sock.setblocking(False)
                loop = asyncio.get_running_loop()
                head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                try:
                    for k in range(0, len(head), 4):
                        await loop.sock_sendall(sock, head[k:k + 4])
                        await asyncio.sleep(0.5)
                except OSError:
                    pass  # closed by the server's header deadline: reconnect


async def attacked_run(base_url: str, jobs: int, turns: int, seed: int, max_requests: int) -> dict[str, Any]:
    """The victim's load while the attacker runs; the attacker stops when the victim is done."""
    attacker = Attacker(base_url, max_requests)
    attack = asyncio.ensure_future(attacker.run())
    await asyncio.sleep(0.5)  # the attack is under way before the victim starts
    victim = await victim_load(base_url, jobs, turns, seed)
    attacker.stop.set()
    await attack
    return {"victim": victim, "attacker": {"sent": attacker.sent, "answers": dict(attacker.answers)}}


async def drain_attack(base_url: str, max_requests: int) -> dict[str, Any]:
    """The attacker alone until ``max_requests`` were sent (the memory check's 10,000)."""
    attacker = Attacker(base_url, max_requests)
    await attacker.run()
    return {"sent": attacker.sent, "answers": dict(attacker.answers)}


def run_phase(model_args: list[str], log_dir: str, jobs: int, turns: int, seed: int,
              attack_requests: int, tenant_max_requests: int = 8) -> dict[str, Any]:
    """Quiet run, attacked run, then the attacker alone to ``attack_requests``; one server throughout."""
    srv: ServerProcess = start_engine_server(engine_args(model_args, tenant_max_requests),
                                             Path(log_dir) / "hostile_tenant.log", name="hostile")
    try:
        asyncio.run(victim_load(srv.base_url, 2, 1, seed + 1))  # warm-up
        rss_start = rss_mb(srv.proc.pid)
        quiet = asyncio.run(victim_load(srv.base_url, jobs, turns, seed))
        attacked = asyncio.run(attacked_run(srv.base_url, jobs, turns, seed, attack_requests))
        rest = max(0, attack_requests - attacked["attacker"]["sent"])
        extra = asyncio.run(drain_attack(srv.base_url, rest)) if rest else {"sent": 0, "answers": {}}
        rss_end = _settled_rss(srv.proc.pid, rss_start)
        alive = srv.alive()
    finally:
        srv.stop(timeout=10)
    return _verdict(quiet, attacked, extra, rss_start, rss_end, alive)


def _settled_rss(pid: int, start: float, wait_s: float = 10.0) -> float:
    """The server's lowest RSS while idle for up to ``wait_s`` (done early once back within the limit):
    unread streams end and request buffers go back to the system meanwhile."""
    lowest, deadline = rss_mb(pid), time.monotonic() + wait_s
    while lowest - start > RSS_LIMIT_MB and time.monotonic() < deadline:
        time.sleep(0.5)
        lowest = min(lowest, rss_mb(pid))
    return lowest


def _verdict(quiet: dict[str, Any], attacked: dict[str, Any], extra: dict[str, Any], rss_start: float,
             rss_end: float, alive: bool) -> dict[str, Any]:
    victim = attacked["victim"]
    answers = Counter(attacked["attacker"]["answers"]) + Counter(extra["answers"])
    lost = sum(v for k, v in victim["outcomes"].items() if k != "completed")
    ratio = (victim["ttft_p99_s"] / quiet["ttft_p99_s"]) if victim["ttft_p99_s"] and quiet["ttft_p99_s"] else None
    five_xx = answers.get("5xx", 0)
    ok = alive and lost == 0 and five_xx == 0 and ratio is not None and ratio <= TTFT_P99_LIMIT \
        and rss_end - rss_start <= RSS_LIMIT_MB
    return {"quiet": quiet, "attacked": victim, "ttft_p99_ratio": ratio, "victim_lost": lost,
            "attacker_requests": attacked["attacker"]["sent"] + extra["sent"], "attacker_answers": dict(answers),
            "rss_start_mb": round(rss_start, 1), "rss_end_mb": round(rss_end, 1), "server_alive": alive,
            "clean": ok}
