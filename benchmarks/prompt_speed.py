"""Prompt processing speed: a fresh long prompt, one request at a time, our server beside llama-server.

What an agent pays on a CPU is prompt processing: every turn brings a test report or a file, and each
miss of the prefix cache processes the whole context again. For each prompt length (default 512,
2,048 and 8,192 tokens) and each of ``--repeats`` runs, every server gets one completion of one token
for a prompt it has never seen (a unique first line, so no cached prefix on either server); the figure
is prompt tokens (the server's own ``usage``) over the request's wall time, the best of the runs. The
servers take turns per run, each started once with its defaults on the same model (llama-server on the
same GGUF file, ``--llama-server PATH``), on 127.0.0.1 and a free port; ours on the CPU unless
``--device`` says otherwise (llama-server runs on the CPU: ``-ngl 0``).

Invariants: a figure's prompt tokens come from the server's ``usage``; the one generated token's time
is inside the wall time of both servers alike; the JSON names the CPU, its ISA and the load average
before and after, and the ratio of each length is ours over llama-server's in the same run.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from agent_engine.config import EngineConfig
from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from agent_engine.server.launcher import ServerProcess, start_engine_server, start_llama_server
from benchmarks.cli import run_standalone
from benchmarks.serve_agent import WORDS

HELP = "prompt tokens/s of one fresh long prompt at a time (vs llama-server if given)"
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
LLAMA = "llama-server"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench prompt``."""
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"a .gguf file or known name (default {DEFAULT_MODEL})")
    ap.add_argument("--lengths", type=lambda s: [int(x) for x in s.split(",")], default=[512, 2048, 8192],
                    help="prompt lengths in tokens, about (default 512,2048,8192)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per length, fresh prompts each (default 3)")
    ap.add_argument("--llama-server", default=None, metavar="BINARY", help="also run llama.cpp's llama-server")
    EngineConfig.add_arguments(ap, ("device", "kv_cache_dtype"), {"device": "cpu"},
                               title="our server (on the CPU by default, where llama-server runs, even on a GPU machine)")
    ap.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for each server")
    ap.add_argument("--log-dir", default="out/prompt_speed_logs", help="server logs go here")
    ap.add_argument("--json", default="out/prompt_speed.json", help="results JSON")


def prompt_text(tokens: int, nonce: str) -> str:
    """About ``tokens`` tokens of common words (one token each in the models' vocabularies) after a
    first line no server has seen."""
    rng = random.Random(nonce)
    return f"[{nonce}]\n" + " ".join(rng.choice(WORDS) for _ in range(max(1, tokens - 16)))


def timed_prompt(base_url: str, model: str, prompt: str) -> dict[str, float]:
    """One completion of one token: its prompt tokens, wall seconds and prompt tokens/s."""
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
    t0 = time.perf_counter()
    r = httpx.post(base_url + "/v1/completions", json=body, timeout=1800, headers={"Connection": "close"})
    wall = time.perf_counter() - t0
    r.raise_for_status()
    tokens = int(r.json()["usage"]["prompt_tokens"])
    return {"prompt_tokens": tokens, "seconds": wall, "prompt_tps": tokens / wall}


def _start(name: str, args: argparse.Namespace, model: str, context: int) -> ServerProcess:
    log = Path(args.log_dir) / f"{name}.log"
    if name == LLAMA:
        return start_llama_server(args.llama_server, model, context, 1, log, startup_timeout=args.startup_timeout)
    blocks = context // 16 + 64
    return start_engine_server(["--model", model, "--device", args.device, "--kv-cache-dtype", args.kv_cache_dtype,
                                "--max-model-len", str(context), "--num-kv-blocks", str(blocks)],
                               log, name="agent-engine", startup_timeout=args.startup_timeout)


def run(args: argparse.Namespace) -> int:
    """Measure every length on every server, print the table, write the JSON."""
    from agent_engine.model.sources import gguf_source

    if args.repeats < 1 or not args.lengths or min(args.lengths) < 32:
        print("bench prompt: --repeats >= 1 and lengths >= 32 tokens", file=sys.stderr)
        return 2
    model = gguf_source(args.model)
    if model is None:
        print(f"bench prompt: {args.model} is not a GGUF file or known GGUF name", file=sys.stderr)
        return 2
    load0 = list(os.getloadavg())
    context = max(args.lengths) + 256
    names = ["agent-engine"] + ([LLAMA] if args.llama_server else [])
    best: dict[tuple[str, int], dict[str, float]] = {}
    servers: dict[str, ServerProcess] = {}
    try:
        for name in names:
            servers[name] = _start(name, args, str(model), context)
        served = {n: httpx.get(s.base_url + "/v1/models", timeout=30).json()["data"][0]["id"] for n, s in servers.items()}
        for run_index in range(args.repeats):
            for length in args.lengths:
                for name in names if run_index % 2 == 0 else names[::-1]:  # alternate who goes first
                    got = timed_prompt(servers[name].base_url, served[name],
                                       prompt_text(length, f"{name} {length} {run_index} {time.time_ns()}"))
                    key = (name, length)
                    if key not in best or got["prompt_tps"] > best[key]["prompt_tps"]:
                        best[key] = got
                    print(f"run {run_index + 1}, {length} tokens, {name}: {got['prompt_tps']:.1f} prompt tok/s",
                          flush=True)
                _write_json(args, names, best, load0, complete=False)  # a run cut short keeps what it measured
    finally:
        for s in servers.values():
            s.stop()
    rows = _rows(names, args.lengths, best)
    headers = ["server", *[f"{n} tok" for n in args.lengths]]
    print(machine_line())
    print_table(headers, [[name, *[round(best[(name, n)]["prompt_tps"], 1) for n in args.lengths]] for name in names])
    if LLAMA in names:
        print_table(["ratio (ours / llama-server)", *[f"{n} tok" for n in args.lengths]],
                    [["prompt tok/s", *[r["ratio"] for r in rows]]])
    _write_json(args, names, best, load0, complete=True)
    return 0


def _write_json(args: argparse.Namespace, names: list[str], best: dict[tuple[str, int], dict[str, float]],
                load0: list[float], *, complete: bool) -> None:
    """The JSON of the lengths every server has run so far (``complete``: all runs of all lengths)."""
    done = [n for n in args.lengths if all((name, n) in best for name in names)]
    write_json(args.json, {"config": {k: v for k, v in vars(args).items() if k != "func"}, "machine": machine_info(),
                           "loadavg_start": load0, "loadavg_end": list(os.getloadavg()), "complete": complete,
                           "rows": _rows(names, done, best)}, quiet=not complete)


def _rows(names: list[str], lengths: list[int], best: dict[tuple[str, int], dict[str, float]]) -> list[dict[str, Any]]:
    """One row per length: each server's best run, and ours over llama-server's when both ran."""
    rows = []
    for n in lengths:
        row: dict[str, Any] = {"length": n, **{name: best[(name, n)] for name in names}}
        if LLAMA in names:
            row["ratio"] = round(best[("agent-engine", n)]["prompt_tps"] / best[(LLAMA, n)]["prompt_tps"], 3)
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.prompt_speed``: the flags and run of ``agent-engine bench prompt``."""
    return run_standalone("prompt", argv)


if __name__ == "__main__":
    sys.exit(main())
