"""Reliability under faults, per scheduling policy: agent load with random disconnects, client timeouts,
bad inputs and one poisoned request, then SIGTERM in the middle of the load.

    python -m benchmarks.reliability [--policies fcfs,priority,continuum,continuum-fixed] [--jobs 12]

Per policy: a fresh server (``--drain-timeout 2``); ``jobs`` agent-like clients, each sending turns
that extend its own prompt with its job hints, streamed or not; some disconnect mid-stream, some use a
read timeout shorter than the answer; the bad inputs of ``bad_inputs.BAD_INPUTS`` (each must be a 4xx
with the API's error body) are interleaved, the poisoned one (a sampling parameter that overflows the
sampler) among them. Once ``--sigterm-after`` requests were sent the server gets SIGTERM and the
clients keep going: later requests must be refused cleanly (503 with a JSON body, or no connection).

With ``--hostile`` a hostile-tenant phase follows (``benchmarks.hostile_tenant``): one tenant sends
every abusive request we know of while another runs agent jobs; the victim's TTFT and JCT are compared
with its quiet run, and the server's memory after ``--hostile-requests`` attacker requests with its
start; then the agent-side phase (``benchmarks.hostile_agent``): commands a model could write against the
judge and the host side, each judged on a shipped task through the real sandbox.

The verdict of a policy is clean when nothing was lost: every accepted request ended with a
completion or an error it could read (a stream with a ``finish_reason`` and ``[DONE]``, or an error
event; a JSON body), every bad input got a 4xx, no request got a bare 5xx, the server exited 0, and its
final account (the engine's last stats line) shows no running or waiting request, no block in use and
every pin ended exactly once. The table and JSON list the counts; the exit status is 1 unless every
policy is clean. Targets live here, never in timed tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from agent_engine.reporting import machine_info, print_table, write_json
from agent_engine.server.engine_like import FINAL_STATS_PREFIX
from agent_engine.server.launcher import ServerProcess, start_engine_server
from benchmarks import hostile_agent
from benchmarks.bad_inputs import BAD_INPUTS, send_bad_input
from benchmarks.cli import run_standalone
from benchmarks.hostile_tenant import TTFT_P99_LIMIT, run_phase
from benchmarks.jct_config import policy_engine_args

HELP = "fault load per policy: disconnects, timeouts, bad inputs, a poisoned request, SIGTERM mid-load"
DEFAULT_POLICIES = ("fcfs", "priority", "continuum", "continuum-fixed")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    p.add_argument("--jobs", type=int, default=12, help="concurrent agent-like clients")
    p.add_argument("--turns", type=int, default=6, help="turns per job")
    p.add_argument("--sigterm-after", type=int, default=40, help="SIGTERM once this many requests were sent")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hostile", action="store_true", help="add the hostile-tenant phase")
    p.add_argument("--hostile-requests", type=int, default=10_000,
                   help="attacker requests in the hostile-tenant phase (the memory check)")
    p.add_argument("--hostile-jobs", type=int, default=6, help="the victim's concurrent agent jobs")
    p.add_argument("--hostile-kv-blocks", type=int, default=512, help="KV pool of the hostile-tenant phase")
    p.add_argument("--log-dir", default="out/reliability_logs")
    p.add_argument("--json", default="out/reliability.json")


async def _turn(client: httpx.AsyncClient, body: dict[str, Any], mode: str) -> tuple[str, list[int]]:
    """One request; returns its outcome and the output token ids (for the job's next prompt)."""
    try:
        if not body["stream"]:
            timeout = httpx.Timeout(60, read=0.05) if mode == "timeout" else httpx.Timeout(60)
            r = await client.post("/v1/completions", json=body, timeout=timeout)
            return _plain_outcome(r), (r.json()["choices"][0].get("token_ids") or []) if r.status_code == 200 else []
        return await _stream(client, body, mode)
    except httpx.TimeoutException:
        return "client_timeout", []
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
        return "refused", []


def _plain_outcome(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return "violation:non_json_body"
    if r.status_code == 200:
        return "completed"
    if "error" not in body:
        return "violation:error_without_body"
    return "refused" if r.status_code == 503 else f"error_{r.status_code}"


async def _stream(client: httpx.AsyncClient, body: dict[str, Any], mode: str) -> tuple[str, list[int]]:
    ids: list[int] = []
    finish, done, chunks = None, False, 0
    async with client.stream("POST", "/v1/completions", json=body, timeout=httpx.Timeout(60)) as r:
        if r.status_code != 200:
            await r.aread()
            return _plain_outcome(r), []
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            event = json.loads(line[6:])
            if "error" in event:
                return "error_event", ids
            choice = (event.get("choices") or [{}])[0]
            ids += choice.get("token_ids") or []
            finish = choice.get("finish_reason") or finish
            chunks += 1
            if mode == "disconnect" and chunks >= 2:
                return "client_disconnect", []
    if not done or finish is None:
        return "violation:stream_cut", ids
    return ("aborted" if finish == "abort" else "completed"), ids


async def _job(client: httpx.AsyncClient, j: int, turns: int, rng: random.Random, sent: list[int],
               outcomes: Counter[str]) -> None:
    prompt = [rng.randrange(20, 2000) for _ in range(rng.randint(30, 120))]
    for t in range(turns):
        mode = rng.choice(["normal"] * 6 + ["disconnect", "timeout"])
        body = {"prompt": prompt, "max_tokens": rng.randint(4, 24), "temperature": rng.choice([0.0, 0.7]),
                "ignore_eos": True, "return_token_ids": True, "stream": mode == "disconnect" or rng.random() < 0.5,
                "job_id": f"rel-{j}", "is_last_step": t == turns - 1, "tool_name": "bash:ls"}
        sent[0] += 1
        outcome, ids = await _turn(client, body, mode)
        outcomes[outcome] += 1
        if outcome == "refused":
            return
        prompt = prompt + ids + [rng.randrange(20, 2000) for _ in range(rng.randint(5, 30))]
        await asyncio.sleep(rng.uniform(0.0, 0.3))  # the tool


async def _load(srv: ServerProcess, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    outcomes: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    sent = [0]
    async with httpx.AsyncClient(base_url=srv.base_url) as client:
        jobs = [asyncio.ensure_future(_job(client, j, args.turns, random.Random(rng.random()), sent, outcomes))
                for j in range(args.jobs)]
        for name in BAD_INPUTS:
            bad[await send_bad_input(client, name)] += 1
        while sent[0] < args.sigterm_after and not all(j.done() for j in jobs):
            await asyncio.sleep(0.05)
        srv.proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*jobs)
    return {"outcomes": dict(outcomes), "bad_inputs": dict(bad), "requests": sent[0]}


def _final_stats(srv: ServerProcess) -> dict[str, Any] | None:
    for line in reversed(srv.log_tail(200_000).splitlines()):
        if FINAL_STATS_PREFIX in line:
            return json.loads(line.split(FINAL_STATS_PREFIX, 1)[1])
    return None


def _verdict(load: dict[str, Any], final: dict[str, Any] | None, rc: int | None) -> dict[str, Any]:
    outcomes, bad = load["outcomes"], load["bad_inputs"]
    violations = sum(v for k, v in outcomes.items() if k.startswith("violation") or k.startswith("error_5"))
    violations += sum(v for k, v in bad.items() if k != "4xx")
    pins = (final or {}).get("pins") or {}
    ended = sum(pins.get(k, 0) for k in ("hit", "expired", "early_released", "released", "aborted"))
    account_ok = bool(final) and final["blocks_in_use"] == 0 and final["num_running"] == 0 \
        and final["num_waiting"] == 0 and pins.get("created", 0) == ended
    return {"violations": violations, "exit_code": rc, "final": final, "pins_created": pins.get("created"),
            "pins_ended": ended, "clean": violations == 0 and rc == 0 and account_ok}


def _engine_args(policy: str) -> list[str]:
    return [*policy_engine_args(policy), "--num-kv-blocks", "96", "--max-model-len", "1024"]


def run_policy(policy: str, args: argparse.Namespace) -> dict[str, Any]:
    log = Path(args.log_dir) / f"{policy}.log"
    engine = [*_engine_args(policy), "--drain-timeout", "2"]
    srv = start_engine_server(engine, log, name=policy, log_level="info")
    try:
        t0 = time.perf_counter()
        load = asyncio.run(_load(srv, args, random.Random(f"{args.seed}-{policy}")))
        rc = srv.proc.wait(60)
        return {**load, **_verdict(load, _final_stats(srv), rc), "wall_s": round(time.perf_counter() - t0, 1)}
    finally:
        srv.stop(timeout=10)


def run(args: argparse.Namespace) -> int:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    rows = {p: run_policy(p, args) for p in policies}
    header = ["policy", "requests", "completed", "aborted", "refused", "client faults", "bad inputs 4xx",
              "violations", "pins made/ended", "blocks left", "exit", "clean"]
    table = []
    for p, r in rows.items():
        o, final = r["outcomes"], r["final"] or {}
        faults = o.get("client_disconnect", 0) + o.get("client_timeout", 0)
        table.append([p, r["requests"], o.get("completed", 0), o.get("aborted", 0) + o.get("error_event", 0),
                      o.get("refused", 0), faults, r["bad_inputs"].get("4xx", 0), r["violations"],
                      f"{r['pins_created']}/{r['pins_ended']}", final.get("blocks_in_use"), r["exit_code"],
                      "yes" if r["clean"] else "NO"])
    print_table(header, table)
    hostile = _hostile_phase(args) if args.hostile else None
    agent_side = hostile_agent.run_phase(args) if args.hostile else None
    write_json(args.json, {"policies": rows, "hostile_tenant": hostile, "hostile_agent": agent_side,
                           "config": {**vars(args), "machine": machine_info()}})
    clean = all(r["clean"] for r in rows.values()) and all(
        phase is None or phase["clean"] for phase in (hostile, agent_side))
    return 0 if clean else 1


def _hostile_phase(args: argparse.Namespace) -> dict[str, Any]:
    # A pool of 512 blocks (the test servers' size): the victim's working set and pins fit beside the
    # attacker's share. In the policy rows' 96 blocks the victim's own pins take half the pool and its
    # returning turns wait behind the attacker's long requests (measured in docs/limits.md).
    model_args = [*policy_engine_args("continuum"), "--num-kv-blocks", str(args.hostile_kv_blocks),
                  "--max-model-len", "1024"]
    phase = run_phase(model_args, args.log_dir, args.hostile_jobs, args.turns, args.seed,
                      args.hostile_requests)
    quiet, attacked = phase["quiet"], phase["attacked"]
    print_table(["victim", "TTFT p50 ms", "TTFT p99 ms", "mean JCT s", "turns", "lost"], [
        [name, _ms(run["ttft_p50_s"]), _ms(run["ttft_p99_s"]), round(run["jct_mean_s"] or 0, 2), run["turns"],
         sum(v for k, v in run["outcomes"].items() if k != "completed")]
        for name, run in (("quiet", quiet), ("under attack", attacked))])
    ratio = phase["ttft_p99_ratio"]
    print(f"p99 TTFT ratio {ratio:.2f} (limit {TTFT_P99_LIMIT:g}); attacker requests "
          f"{phase['attacker_requests']}: {phase['attacker_answers']}; RSS {phase['rss_start_mb']} -> "
          f"{phase['rss_end_mb']} MB; clean: {'yes' if phase['clean'] else 'NO'}" if ratio else phase)
    return phase


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.reliability``: the flags and run of ``agent-engine bench reliability``."""
    return run_standalone("reliability", argv)


if __name__ == "__main__":
    raise SystemExit(main())
