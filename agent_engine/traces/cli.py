"""``agent-engine trace synth|fit`` and ``agent-engine replay``: argument parsing and dispatch only.

``register(subparsers)`` adds the commands to the top-level parser; each sets ``func`` (called as
``args.func(args)``, returns the exit status). Invariants: commands write only their ``-o``/``--out``
file (and a summary line or JSON on stdout); heavy work lives in ``traces`` and ``replay``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main", "register"]


def _cmd_synth(args: argparse.Namespace) -> int:
    from agent_engine.traces.format import write_jobs
    from agent_engine.traces.profile import load_profile
    from agent_engine.traces.synth import synthesize

    jobs = synthesize(load_profile(args.profile), args.jobs, seed=args.seed)
    write_jobs(args.output, jobs)
    n_turns = sum(len(j.turns) for j in jobs)
    print(f"wrote {len(jobs)} jobs ({n_turns} turns) from profile {args.profile!r} to {args.output}")
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    from agent_engine.traces.format import read_jobs
    from agent_engine.traces.profile import fit_profile, save_profile

    jobs = read_jobs(args.trace)
    profile = fit_profile(
        jobs,
        name=args.name,
        min_samples=args.min_samples,
        tool_dist=args.tool_dist,
        description=args.description,
    )
    save_profile(profile, args.output)
    st = profile.stats
    print(
        f"fitted {st['jobs']} jobs / {st['turns']} turns -> {args.output}: "
        f"turns p50 {st['turns_per_job']['p50']:g}, prompt p50 {st['prompt_tokens']['p50']:g}, "
        f"output p50 {st['output_tokens']['p50']:g}, tool p50 {st['tool_seconds']['p50']:g} s"
    )
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from agent_engine.replay.client import ReplayOptions, replay_sync
    from agent_engine.replay.records import write_records
    from agent_engine.traces.format import read_jobs

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
    )
    result = replay_sync(args.url, read_jobs(args.trace), options)
    write_records(args.out, result.records)
    print(json.dumps(result.summary, indent=1))
    return 1 if result.summary["jobs_failed"] else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``trace synth``, ``trace fit`` and ``replay`` to the top-level ``agent-engine`` parser."""
    trace = subparsers.add_parser("trace", help="agent traces: synthesize or fit profiles")
    sub = trace.add_subparsers(dest="trace_cmd", required=True)

    p = sub.add_parser("synth", help="generate jobs from a workload profile")
    p.add_argument("--profile", default="swe", help="built-in profile (swe, bfcl) or a profile JSON path")
    p.add_argument("--jobs", type=int, required=True, help="number of jobs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help="trace JSONL to write")
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("fit", help="measure a workload profile from a trace")
    p.add_argument("trace", help="trace JSONL (one job a line)")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write")
    p.add_argument("--name", default="fitted")
    p.add_argument("--description", default="")
    p.add_argument("--min-samples", type=int, default=20, help="per-tool dists need this many samples")
    p.add_argument("--tool-dist", choices=("empirical", "lognormal"), default="empirical")
    p.set_defaults(func=_cmd_fit)

    p = subparsers.add_parser("replay", help="replay a trace against an OpenAI-compatible server")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--trace", required=True, help="trace JSONL (one job a line)")
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
    p.add_argument("--no-stream", action="store_true", help="non-streaming requests (no TTFT)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", required=True, help="records JSONL to write")
    p.set_defaults(func=_cmd_replay)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m agent_engine.traces.cli ...``) with only these commands."""
    ap = argparse.ArgumentParser(prog="agent-engine")
    register(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
