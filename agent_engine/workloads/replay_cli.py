"""``agent-engine replay``: replay a trace against an OpenAI-compatible server as closed-loop agent jobs.

Invariants: writes only the ``--out`` records file and prints the summary JSON; the exit status is
1 when any job failed, else 0. The work lives in ``agent_engine.workloads.replay``.
"""

from __future__ import annotations

import argparse
import json

from agent_engine.workloads.hint_styles import HINT_STYLES

__all__ = ["HELP", "add_arguments"]

HELP = "replay a trace against a server as agent jobs (token-id prompts, tool sleeps)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``replay`` flags; sets ``func``."""
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--trace", default=None,
                   help="trace JSONL, synth:PROFILE or default (default: the shipped default trace)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--jps", type=float, default=None, help="Poisson job arrivals, jobs per second")
    mode.add_argument("--concurrency", type=int, default=None, help="closed loop: at most N jobs in flight")
    p.add_argument("--jobs", type=int, default=None, help="replay only the first N jobs")
    p.add_argument("--max-turns", type=int, default=None, help="replay at most N turns per job")
    p.add_argument("--token-scale", type=float, default=1.0, help="scale prompt and output lengths")
    p.add_argument("--time-scale", type=float, default=1.0, help="scale tool sleeps (never capped)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default=None, help="model name to send (default: none, the server's)")
    p.add_argument("--vocab-size", type=int, default=4000, help="fresh token ids stay below this")
    p.add_argument("--min-token-id", type=int, default=16, help="fresh token ids stay at or above this")
    p.add_argument("--max-model-len", type=int, default=None, help="truncate jobs whose prompts outgrow it")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request read timeout, seconds")
    p.add_argument("--hints", default="job_id", choices=HINT_STYLES,
                   help="how jobs are told to the server: our hints, none (inferred), or a client's convention")
    p.add_argument("--no-stream", action="store_true", help="non-streaming requests (no TTFT)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", required=True, help="records JSONL to write")
    p.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    from agent_engine.workloads.replay.client import replay_sync
    from agent_engine.workloads.replay.plan import ReplayOptions
    from agent_engine.workloads.replay.records import write_records
    from agent_engine.workloads.traces.source import load_trace

    options = ReplayOptions(
        jps=args.jps,
        concurrency=args.concurrency,
        max_jobs=args.jobs,
        max_turns=args.max_turns,
        token_scale=args.token_scale,
        time_scale=args.time_scale,
        seed=args.seed,
        model=args.model,
        vocab_size=args.vocab_size,
        min_token_id=args.min_token_id,
        max_model_len=args.max_model_len,
        stream=not args.no_stream,
        request_timeout=args.timeout,
        progress=not args.no_progress,
        hints=args.hints,
    )
    jobs = load_trace(args.trace, max_jobs=args.jobs, seed=args.seed)
    result = replay_sync(args.url, jobs, options)
    write_records(args.out, result.records)
    print(json.dumps(result.summary, indent=1))
    return 1 if result.summary["jobs_failed"] else 0
