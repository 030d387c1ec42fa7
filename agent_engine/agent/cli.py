"""``agent-engine agent``: run live shell-agent jobs against an OpenAI-compatible server.

Wiring: ``add_arguments(parser)`` adds the flags and sets ``func`` (the CLI registry calls
``args.func(args)``); the module imports only ``argparse`` at import time.

Invariants: exactly one of ``--task``/``--tasks`` is given (``--tasks builtin``: the shipped task set
of ``agent_engine.agent.task_set``, whose checks say which jobs solved their task); ``--jobs N`` runs N
jobs by cycling over the tasks (default: one job per task); ``--hints`` is a style of
``agent_engine.workloads.hint_styles`` (default ``job_id``; ``none`` sends no hint and no DELETE); the
records file is always written (``--out``), the trace file only with ``--save-trace``; the exit status
is 0 when every job ended without an error (Submitted or LimitsExceeded, solved or not), else 1; bad
input (an unknown task file, a bad line, ``--repo`` with ``builtin``) is a message and exit status 2.

The API key never travels on the command line (where ``ps`` and ``/proc/<pid>/cmdline`` show it to
every local user): it comes from ``--api-key-file`` (first line) or the ``AGENT_ENGINE_API_KEY``
environment variable; ``--api-key`` is refused with a message saying so. Commands run in the sandbox
of ``agent_engine.agent.sandbox``; ``--allow-network`` gives them the network, and the summary's
``sandbox`` entry says which protections held (docs/sandbox.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["API_KEY_ENV", "HELP", "add_arguments", "read_api_key"]

API_KEY_ENV = "AGENT_ENGINE_API_KEY"
ISOLATION_CHOICES = ("auto", "namespaces", "process")  # agent_engine.agent.sandbox.ISOLATION_MODES

HELP = "run live shell-agent jobs against a server and record them"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``agent`` command: shell-agent jobs (one tool call or bash command per turn) against a server."""
    from agent_engine.workloads.hint_styles import HINT_STYLES  # a module without imports of its own

    p.add_argument("--base-url", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="model name sent in requests (default: the server's)")
    p.add_argument("--api-key-file", default=None,
                   help=f"file whose first line is the API key (default: ${API_KEY_ENV}, else none)")
    p.add_argument("--api-key", default=None, help=argparse.SUPPRESS)  # refused: see the module docstring
    p.add_argument("--repo", default=None,
                   help="folder copied into each job's sandbox (default: empty folder)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help="the task text of every job")
    src.add_argument("--tasks", help='"builtin" (the shipped task set, with checks) or a JSONL file, one '
                                     '{"task": ..., "repo"?: ..., "job_id"?: ..., "check"?: ...} a line')
    p.add_argument("--jobs", type=int, default=None,
                   help="number of jobs (cycles over the tasks; default: one each)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs in flight at once (default: 1)")
    p.add_argument("--step-limit", type=int, default=30, help="model calls per job at most (default: 30)")
    p.add_argument("--command-timeout", type=float, default=60.0, help="seconds per command (default: 60)")
    p.add_argument("--max-output-chars", type=int, default=10000,
                   help="command output kept per observation, at most the served model's context length in "
                        "characters when the server reports it (default: 10000)")
    p.add_argument("--max-tokens", type=int, default=None, help="max tokens per answer (default: server's)")
    _add_sampling_arguments(p)
    p.add_argument("--no-stream", action="store_true", help="non-streamed requests (no TTFT measured)")
    p.add_argument("--hints", choices=HINT_STYLES, default="job_id", metavar="STYLE",
                   help="how calls name their job: job_id (job_id, is_last_step, DELETE at the end), none "
                        "(no hint: the server infers the job), or a client's session field: "
                        f"{', '.join(s for s in HINT_STYLES if s not in ('job_id', 'none'))} (default: job_id)")
    p.add_argument("--interface", choices=("tools", "text"), default="tools",
                   help="tools: bash, view_file, edit_file and submit as tool calls (tool_choice required); "
                        "text: one ```bash block per answer, mini-swe-agent style (default: tools)")
    p.add_argument("--aids", choices=("auto", "on", "off"), default="auto",
                   help="the repository map in the task and the failing code after a failing command "
                        "(default auto: on for --interface tools, off for text)")
    p.add_argument("--job-id-prefix", default=None,
                   help="job ids are PREFIX<index> (default: agent-<random>-)")
    p.add_argument("--allow-network", action="store_true",
                   help="let commands reach the network (default: a network namespace of their own)")
    p.add_argument("--isolation", choices=ISOLATION_CHOICES, default="auto",
                   help="auto: namespaces when the machine offers them; namespaces: required; "
                        "process: limits and cleanup only (default: auto)")
    _add_output_arguments(p)
    p.set_defaults(func=_cmd_agent)


def _add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """How the agent's calls sample: temperature, attempts, the rewrite stage, seeds, the repeat escalation."""
    from agent_engine.agent.rewrites import (
        DEFAULT_MUTANTS,
        DEFAULT_REWRITE_FUNCTIONS,
        DEFAULT_REWRITE_SAMPLES,
    )

    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0)")
    p.add_argument("--attempts", type=int, default=1,
                   help="attempts per job: when a task's check does not pass, another attempt branches from the "
                        "first one's reads, sampled hotter, until one passes (default: 1)")
    p.add_argument("--attempt-temperature", type=float, default=None,
                   help="temperature of attempts after the first (default: agent_engine.agent.attempts')")
    p.add_argument("--rewrites", type=int, default=DEFAULT_REWRITE_SAMPLES, metavar="N",
                   help="before the agent, rewrite each function the failing tests point to N times, judged by "
                        "the task's check (0: no rewrite stage; default: %(default)s)")
    p.add_argument("--rewrite-functions", type=int, default=DEFAULT_REWRITE_FUNCTIONS, metavar="K",
                   help="suspect functions the rewrite stage tries, at most (default: %(default)s)")
    p.add_argument("--mutants", type=int, default=DEFAULT_MUTANTS, metavar="M",
                   help="before any rewrite, try at most M one-token and one-statement edits of the suspects, "
                        "judged by the task's check (0: none; default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the agent's sampled calls: a call at step S sends seed SEED+S whenever its "
                        "temperature is above 0 (default: 0)")
    p.add_argument("--repeat-temperature-step", type=float, default=0.4,
                   help="after a repeated call, the next call's temperature rises by this much per consecutive "
                        "repeat (0: stay at --temperature) (default: 0.4)")
    p.add_argument("--repeat-temperature-cap", type=float, default=1.2,
                   help="the temperature a run of repeats raises the next call to, at most (default: 1.2)")


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """What a run writes: records, trace, transcripts, progress."""
    p.add_argument("--out", required=True, help="per-turn and per-job records (JSONL)")
    p.add_argument("--save-trace", default=None, help="also save the run in the agent-trace format (JSONL)")
    p.add_argument("--transcripts", default=None, metavar="DIR",
                   help="write each attempt's conversation and verdict here, one JSON file per attempt")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _cmd_agent(args: argparse.Namespace) -> int:
    """Run the jobs described by ``args``, write the files, print the summary; returns the exit status."""
    from agent_engine.agent.attempts import attempt_policy
    from agent_engine.agent.job_runner import RunOptions, run_agent_jobs_sync
    from agent_engine.agent.loop import AgentConfig
    from agent_engine.agent.rewrites import RewritePolicy
    from agent_engine.workloads.replay.records import write_records
    from agent_engine.workloads.traces.format import write_jobs

    if args.api_key is not None:
        print(f"--api-key is not accepted (other users can read a command line): put the key in "
              f"${API_KEY_ENV} or in a file given by --api-key-file", file=sys.stderr)
        return 2
    try:
        api_key = read_api_key(args.api_key_file)
    except (OSError, ValueError) as e:
        print(f"cannot read the API key: {e}", file=sys.stderr)
        return 2
    try:
        jobs = _jobs(args)
        agent = AgentConfig(step_limit=args.step_limit, max_tokens=args.max_tokens,
                            temperature=args.temperature, model=args.model, stream=not args.no_stream,
                            hints=args.hints, interface=args.interface, seed=args.seed,
                            repeat_temperature_step=args.repeat_temperature_step,
                            repeat_temperature_cap=args.repeat_temperature_cap,
                            aids=None if args.aids == "auto" else args.aids == "on")
        options = RunOptions(args.base_url, agent, concurrency=args.concurrency,
                             command_timeout=args.command_timeout,
                             max_output_chars=args.max_output_chars, api_key=api_key,
                             job_id_prefix=args.job_id_prefix, progress=not args.no_progress,
                             allow_network=args.allow_network, isolation=args.isolation,
                             attempts=attempt_policy(args.attempts, args.attempt_temperature),
                             transcripts=args.transcripts,
                             rewrites=RewritePolicy(args.rewrites, args.rewrite_functions, args.mutants))
    except (OSError, ValueError) as e:
        print(f"agent: {e}", file=sys.stderr)
        return 2
    try:
        result = run_agent_jobs_sync(jobs, options)
    except ValueError as e:  # e.g. --isolation namespaces on a machine without them
        print(f"agent: {e}", file=sys.stderr)
        return 2
    write_records(args.out, result.records)
    if args.save_trace:
        write_jobs(args.save_trace, result.trace_jobs)
    print(json.dumps(_printable(result.summary), indent=2))
    return 0 if all(r.job.error is None for r in result.results) else 1


def _jobs(args: argparse.Namespace) -> list[Any]:
    """The ``AgentTask`` of every job: ``--task``/``--tasks``, cycled to ``--jobs``; ValueError on bad input."""
    from agent_engine.agent.task_set import AgentTask, resolve_tasks

    tasks = [AgentTask(args.task, args.repo)] if args.task is not None else resolve_tasks(args.tasks, args.repo)
    if not tasks:
        raise ValueError("no tasks")
    n = args.jobs if args.jobs is not None else len(tasks)
    if n < 1:
        raise ValueError("--jobs must be >= 1")
    jobs = [tasks[i % len(tasks)] for i in range(n)]
    if args.jobs is not None and len(tasks) < n:
        jobs = [dataclasses.replace(t, job_id=None) for t in jobs]  # cycled copies cannot share a job id
    return jobs


def read_api_key(path: str | None) -> str | None:
    """The key from ``path`` (its first line) when given, else from ``$AGENT_ENGINE_API_KEY``, else None."""
    if path is None:
        return os.environ.get(API_KEY_ENV) or None
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    key = lines[0].strip() if lines else ""
    if not key:
        raise ValueError(f"{path} holds no key on its first line")
    return key


def _printable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}
