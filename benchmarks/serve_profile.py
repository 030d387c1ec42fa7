"""Sample our server with py-spy under N-way streaming load and group the samples by what they were doing.

Each py-spy sample is one thread's stack; it is put in the group of the innermost frame that matches
``GROUPS`` (model forward, attention, sampler, scheduler, output processing, detokenization, engine
hand-off, SSE, HTTP, event loop), or ``idle`` when the leaf frame waits (lock, select, sleep).
Reported per group: the share of all non-idle samples, and that share in CPU-seconds per second.

Invariant: the load runs against 127.0.0.1 only and stops after ``--serve-seconds``; py-spy is
optional (without it the serving part reports that it was skipped).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from agent_engine.reporting import print_table

GROUPS = (  # (group, substrings of "function (file:line)"), innermost match wins
    ("paged attention", ("paged_attention",)),
    ("matmul (C++ ops)", ("linear (", "gate_up_silu (", "quant.py")),
    ("norms, rotary, SiLU (C++ ops)", ("cpu_ops.py",)),
    ("model forward", ("lean_decoder.py", "modeling_", "torch/nn/", "runner.py")),
    ("sampler", ("sampler.py",)),
    ("attention metadata", ("attention_metadata.py", "torch_plan.py")),
    ("scheduler", ("scheduler/",)),
    ("detokenization", ("detokenizer.py", "tokenizers", "tokenization_utils")),
    ("output processing", ("llm_engine.py",)),
    ("engine hand-off", ("async_engine.py", "groups.py")),
    ("SSE / responses", ("streaming.py", "respond.py", "responses.py")),
    ("HTTP (uvicorn/starlette)", ("uvicorn", "starlette", "fastapi", "h11", "httptools", "pydantic")),
    ("event loop", ("asyncio", "uvloop")),
)
_IDLE_LEAVES = ("wait (threading", "select (", "_worker (concurrent", "sleep", "acquire", "poll (", "epoll",
                "_run_once", "run_forever")


def classify(frames: list[str]) -> str:
    """The group of one stack (root first, leaf last)."""
    if not frames:
        return "idle"
    leaf = frames[-1]
    if any(k in leaf for k in _IDLE_LEAVES):
        return "idle"
    for frame in reversed(frames):
        for group, keys in GROUPS:
            if any(k in frame for k in keys):
                return group
    return "other"


def parse_raw(text: str) -> Counter[str]:
    """py-spy ``--format raw`` (one collapsed stack and a count per line) -> samples per group."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        out[classify(stack.split(";"))] += int(count)
    return out


async def _client(base_url: str, model: str, concurrency: int, until: float, max_tokens: int) -> int:
    from benchmarks.serve_agent import stream_completion
    from benchmarks.serve_load import _prompt

    done = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        async def worker(w: int) -> None:
            nonlocal done
            i = 0
            while time.monotonic() < until:
                await stream_completion(client, model, _prompt(w * 1000 + i, 48), max_tokens)
                done += 1
                i += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done


def serve_profile(args: argparse.Namespace) -> dict[str, Any]:
    """Start our server, put ``args.concurrency`` streaming clients on it, sample it with py-spy."""
    from agent_engine.server.launcher import start_engine_server

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return {"skipped": "py-spy not installed (pip install py-spy)"}
    log_dir = Path(tempfile.mkdtemp(prefix="profile-serve-"))
    extra = ["--model", args.model] if args.model else []  # as named: a GGUF is served from its blocks
    with start_engine_server(extra + ["--num-kv-blocks", "1024", "--max-model-len", "1024"],
                             log_dir / "server.log") as srv:
        model = str(httpx.get(srv.base_url + "/v1/models", timeout=10).json()["data"][0]["id"])
        asyncio.run(_client(srv.base_url, model, 1, time.monotonic() + 2, 4))  # warm-up
        raw = log_dir / "spy.txt"
        until = time.monotonic() + args.serve_seconds + 1
        load = threading.Thread(target=lambda: results.append(
            asyncio.run(_client(srv.base_url, model, args.concurrency, until, 32))))
        results: list[int] = []
        load.start()
        time.sleep(0.5)
        subprocess.run([spy, "record", "--pid", str(srv.proc.pid), "--duration", str(int(args.serve_seconds)),
                        "--rate", "200", "--format", "raw", "--nonblocking", "--output", str(raw)],
                       capture_output=True, timeout=args.serve_seconds + 60, check=False)
        load.join(timeout=args.serve_seconds + 120)
    if not raw.exists():
        return {"skipped": "py-spy produced no samples (ptrace not permitted?)"}
    groups = parse_raw(raw.read_text())
    return {"samples": dict(groups), "seconds": args.serve_seconds, "rate": 200,
            "requests": results[0] if results else None, "concurrency": args.concurrency}


def report_serve(res: dict[str, Any]) -> None:
    if "skipped" in res:
        print(f"serving profile skipped: {res['skipped']}")
        return
    samples = res["samples"]
    busy = sum(v for k, v in samples.items() if k != "idle") or 1
    per_s = res["rate"] * res["seconds"]
    print(f"serving, {res['concurrency']} concurrent streams, {res['requests']} requests in "
          f"{res['seconds']:.0f} s (py-spy, all threads):")
    rows = [[k, 100 * v / busy, v / per_s] for k, v in sorted(samples.items(), key=lambda kv: -kv[1]) if k != "idle"]
    print_table(["where", "% of busy samples", "thread-s per s"], rows)
