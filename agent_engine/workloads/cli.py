"""``agent-engine trace synth|fit|import``: argument parsing and dispatch only.

``add_arguments(parser)`` adds the subcommands; each sets ``func`` (called as ``args.func(args)``,
returns the exit status). Invariants: commands write only their ``-o`` file (``import`` also its
``--report-json``) and a summary on stdout; the work lives in ``agent_engine.workloads.traces``.
``import`` exits 2 with a one-line message for a missing file or one of unknown shape, 1 when no job
is left or (``--strict``) any line was dropped, writing no trace then.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["HELP", "add_arguments"]

HELP = "agent traces: synthesize from a profile, fit a profile, import agent logs"


def _cmd_synth(args: argparse.Namespace) -> int:
    from agent_engine.workloads.traces.format import write_jobs
    from agent_engine.workloads.traces.profile import load_profile
    from agent_engine.workloads.traces.synth import synthesize

    jobs = synthesize(load_profile(args.profile), args.jobs, seed=args.seed)
    write_jobs(args.output, jobs)
    n_turns = sum(len(j.turns) for j in jobs)
    print(f"wrote {len(jobs)} jobs ({n_turns} turns) from profile {args.profile!r} to {args.output}")
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    from agent_engine.workloads.traces.profile import fit_profile, save_profile
    from agent_engine.workloads.traces.source import load_trace

    jobs = load_trace(args.trace)
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


def _cmd_import(args: argparse.Namespace) -> int:
    from agent_engine.reporting import write_json
    from agent_engine.workloads.traces.format import write_jobs
    from agent_engine.workloads.traces.importers import import_logs

    try:
        result = import_logs(args.logs)
    except ValueError as e:
        print(f"agent-engine trace import: error: {e}", file=sys.stderr)
        return 2
    report = result.report
    report.print()
    write_json(args.report_json, report.to_dict())
    if args.strict and report.dropped:
        print(f"agent-engine trace import: error: {len(report.dropped)} lines dropped (--strict); "
              "no trace written", file=sys.stderr)
        return 1
    if not result.jobs:
        print("agent-engine trace import: error: no job left to write", file=sys.stderr)
        return 1
    write_jobs(args.output, result.jobs)
    print(f"wrote {report.jobs_kept} jobs ({report.turns_kept} turns) to {args.output}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``trace synth``, ``trace fit`` and ``trace import``."""
    sub = parser.add_subparsers(dest="trace_cmd", required=True)

    p = sub.add_parser("synth", help="generate jobs from a workload profile")
    p.add_argument("--profile", default="swe", help="built-in profile (swe, bfcl) or a profile JSON path")
    p.add_argument("--jobs", type=int, required=True, help="number of jobs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help="trace JSONL to write")
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("fit", help="measure a workload profile from a trace")
    p.add_argument("trace", help="trace JSONL (one job a line), synth:PROFILE or default")
    p.add_argument("-o", "--output", required=True, help="profile JSON to write")
    p.add_argument("--name", default="fitted")
    p.add_argument("--description", default="")
    p.add_argument("--min-samples", type=int, default=20, help="per-tool dists need this many samples")
    p.add_argument("--tool-dist", choices=("empirical", "lognormal"), default="empirical")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser("import", help="turn agent logs (trace JSONL, OpenAI or Anthropic message logs) "
                       "into a valid trace, repairing what can be and reporting the rest")
    p.add_argument("logs", nargs="+", metavar="LOG", help="JSONL log files (shape detected per file)")
    p.add_argument("-o", "--output", required=True, help="trace JSONL to write")
    p.add_argument("--report-json", default=None, metavar="FILE",
                   help="write the import report (counts, dropped lines, repairs) as JSON")
    p.add_argument("--strict", action="store_true", help="any dropped line is an error (no trace written)")
    p.set_defaults(func=_cmd_import)
