"""Repair by mutants alone, without a model: which shipped tasks the rewrite stage's first phase solves.

For every task of the given sets or task files that has a check (``--tasks libraries,suites``), the
rewrite stage runs in a sandbox made as the runner makes it (the check files read-only) with no model answers
(``RewritePolicy(samples=0, mutants=M)``): the suspects, then at most ``M`` mutants
(``agent_engine.agent.mutants``) each written and checked. The judge (``agent_engine.agent.judge``:
the pristine check files, the check's own test report) then says whether the task is solved. The
row names the mutant that passed, how many were tried, and the seconds the task took.

Invariants: nothing here calls a model (the stage's client points nowhere and is never used: a call
would fail the task); a task counts as solved only by the judge's verdict, not the stage's status.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

import httpx

from agent_engine.agent.job_config import AgentConfig, AgentJobResult
from agent_engine.agent.judge import check_paths, judge, protect
from agent_engine.agent.mutant_trials import PASSED_NOTE
from agent_engine.agent.rewrites import (
    DEFAULT_MUTANTS,
    DEFAULT_REWRITE_FUNCTIONS,
    RewritePolicy,
    rewrite_stage,
)
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import AgentTask, resolve_tasks
from agent_engine.json_types import JsonObject
from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.cli import run_standalone

HELP = "which shipped tasks the rewrite stage's mutants solve before any model call (no model)"
NOWHERE = "http://127.0.0.1:9"  # the discard port: the stage never calls a model here


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench mutants``."""
    ap.add_argument("--tasks", default="libraries,suites",
                    help="shipped task sets or task JSONL files (bench injected writes one), comma-separated")
    ap.add_argument("--mutants", type=int, default=DEFAULT_MUTANTS, help="mutants tried per task, at most")
    ap.add_argument("--functions", type=int, default=DEFAULT_REWRITE_FUNCTIONS, help="suspects mutated, at most")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for one command in the sandbox")
    ap.add_argument("--only", default="", help="comma-separated task names to run (default: all)")
    ap.add_argument("--json", default="out/mutation_repair.json", help="results JSON")


def repaired(task: AgentTask, policy: RewritePolicy, timeout: float, base_url: str | None = None) -> JsonObject:
    """One task through the stage, judged: its row. Without ``base_url`` (a server for the model's
    rewrites; then ``policy.samples`` may be above 0) the stage's client points nowhere."""
    sandbox = Sandbox.create(task.repo, timeout=timeout)
    started = time.perf_counter()
    try:
        protect(sandbox.workdir_path, check_paths(task))
        result = asyncio.run(_stage(task, sandbox, policy, base_url or NOWHERE))
        verdict = judge(sandbox, task)
    finally:
        sandbox.close()
    passed = next((m["content"] for m in result.messages if m["content"].startswith(PASSED_NOTE)), "")
    return {"task": task.name, "solved": verdict.solved, "verdict": verdict.reason, "tried": result.job.mutants,
            "exit_status": result.job.exit_status, "seconds": round(time.perf_counter() - started, 1),
            "mutant": passed.split("\n", 1)[0]}


async def _stage(task: AgentTask, sandbox: Sandbox, policy: RewritePolicy, base_url: str) -> AgentJobResult:
    async with httpx.AsyncClient(base_url=base_url, timeout=600.0) as client:
        return await rewrite_stage(client, task.task, sandbox, task.name, AgentConfig(), policy, str(task.check),
                                   t0=time.perf_counter())


def run(args: argparse.Namespace) -> int:
    policy = RewritePolicy(samples=0, functions=args.functions, mutants=args.mutants)
    only = {n for n in args.only.split(",") if n}
    rows: list[JsonObject] = []
    for set_name in [s for s in args.tasks.split(",") if s]:
        for task in resolve_tasks(set_name):
            if task.check is None or (only and task.name not in only):
                continue
            row = {"set": set_name, **repaired(task, policy, args.timeout)}
            rows.append(row)
            print(f"{task.name}: {'solved' if row['solved'] else 'not solved'} after {row['tried']} mutants, "
                  f"{row['seconds']} s", flush=True)
    print_table(["task", "solved", "mutants tried", "seconds", "the mutant that passed"],
                [[r["task"], r["solved"], r["tried"], r["seconds"], str(r["mutant"])[:90]] for r in rows])
    summary = {"tasks": len(rows), "solved": sum(1 for r in rows if r["solved"]),
               "seconds": round(sum(float(r["seconds"]) for r in rows), 1)}
    print(f"solved {summary['solved']} of {summary['tasks']} by mutants alone in {summary['seconds']} s")
    write_json(args.json, {"config": {k: v for k, v in vars(args).items() if k != "func"}, "machine": machine_info(),
                           "summary": summary, "rows": rows})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.mutation_repair``: the same as ``agent-engine bench mutants``."""
    return run_standalone("mutants", argv)


if __name__ == "__main__":
    raise SystemExit(main())
