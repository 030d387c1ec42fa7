"""``bench serve``'s client side: one streamed completion, and the agent-shaped workload.

The agent workload (``--workload agent``): each of ``concurrency`` sessions runs ``turns`` turns. Every
session's first prompt is one system prefix shared by all sessions (``prefix_words`` words: thousands
of tokens, as a coding agent's instructions and tool list are) plus a task line of its own; each next
prompt is the previous one plus the text the server generated and a tool observation of
``obs_words`` fresh words, sent ``tool_gap`` seconds after the answer (the tool call). So every turn
but a session's first extends a prefix the server has seen, and a prefix cache decides its TTFT.

Invariants: a session's prompts only grow (each is a prefix of the next); the shared prefix and each
session's words depend only on the session's number, so every server gets the same prompts; tokens
come from the servers' own ``usage`` chunks and TTFT is timed at the client up to the first chunk
carrying text.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import httpx

WORDS = ("agent tool call result file read write search plan step observe think answer code test build "
         "deploy query index cache token block memory").split()


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` by nearest rank (NaN for no data)."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def words(seed: int, n: int) -> str:
    """``n`` words, a fixed function of ``seed``."""
    return " ".join(WORDS[(seed * 7 + j * 3 + j * j) % len(WORDS)] for j in range(n))


async def stream_completion(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One streamed greedy completion (``ignore_eos``): TTFT, end-to-end seconds, tokens and text."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, tokens, text = None, 0, []
    async with client.stream("POST", "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(f"server error: {ev['error']}")
            if ev.get("choices") and ev["choices"][0].get("text"):
                text.append(ev["choices"][0]["text"])
                if ttft is None:
                    ttft = time.perf_counter() - t0
            if ev.get("usage"):
                tokens = int(ev["usage"]["completion_tokens"])
    return {"ttft": ttft if ttft is not None else time.perf_counter() - t0, "e2e": time.perf_counter() - t0,
            "tokens": tokens, "text": "".join(text)}


async def agent_level(base_url: str, model: str, concurrency: int, turns: int, max_tokens: int,
                      prefix_words: int, obs_words: int, tool_gap: float, first_session: int = 0) -> dict[str, Any]:
    """``concurrency`` agent sessions of ``turns`` turns at once (see the module docstring)."""
    system = "You are a coding agent. " + words(0, prefix_words)
    results: list[dict[str, Any]] = []
    # One connection per request: llama-server closes a kept-alive connection after a few requests,
    # racing the client's next request on it; every server gets the same treatment.
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits,
                                 headers={"Connection": "close"}) as client:
        async def session(s: int) -> None:
            prompt = f"{system}\n[task {s}] {words(s, 12)}\n"
            for turn in range(turns):
                if turn:
                    await asyncio.sleep(tool_gap)
                res = await stream_completion(client, model, prompt, max_tokens)
                results.append({**res, "turn": turn})
                prompt += res["text"] + f"\n[observation {turn}] {words(s * 31 + turn, obs_words)}\n"

        t0 = time.perf_counter()
        await asyncio.gather(*(session(first_session + i) for i in range(concurrency)))
        wall = time.perf_counter() - t0
    return summarize(results, concurrency, wall)


def summarize(results: list[dict[str, Any]], concurrency: int, wall: float) -> dict[str, Any]:
    """A level's figures: tokens/s over the wall time, TTFT over every request and over later turns."""
    ttfts = [r["ttft"] for r in results]
    later = [r["ttft"] for r in results if r.get("turn", 0) > 0]
    tokens = sum(int(r["tokens"]) for r in results)
    return {"concurrency": concurrency, "requests": len(results), "wall_s": wall, "generated_tokens": tokens,
            "tokens_per_s": tokens / wall if wall > 0 else 0.0, "ttft_mean_s": statistics.fmean(ttfts),
            "ttft_p50_s": pct(ttfts, 0.5), "ttft_p90_s": pct(ttfts, 0.9),
            "later_turn_ttft_p50_s": pct(later, 0.5) if later else None,
            "e2e_mean_s": statistics.fmean(r["e2e"] for r in results)}
