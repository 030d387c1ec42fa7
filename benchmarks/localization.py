"""Fault localization of the rewrite stage, without a model: where the function a task's fix changes ranks.

For every shipped task of the given sets that has a ``solution`` (``--tasks libraries,suites``), the
task's repository is copied, the solution applied to the copy and the two diffed: the first changed
line names the file and line the fix touches. In a sandbox of the pristine repository (its check
files read-only, as the runner makes them) the check runs, and the stage's ``suspects`` op ranks the
suspects (``agent_engine.agent.repair_tool``: Ochiai over the failing tests' spectrum, the issue's
words as a small prior, the static failing path). The row names the fix's rank among the function
suspects (0: first; none: not a suspect), how many there were and the first few.

Invariants: nothing here calls a model; the rank is read from the same op, flags and sandbox the
stage uses, with a larger ``limit``; the JSON keeps every task's suspects as the op printed them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agent_engine.agent.aci import run_program
from agent_engine.agent.failures import read_failures
from agent_engine.agent.judge import check_paths, protect
from agent_engine.agent.repair_tool import SUSPECT_LINES
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.stage_sandbox import python_check_args
from agent_engine.agent.task_set import AgentTask, set_solutions, set_tasks
from agent_engine.json_types import JsonObject
from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.cli import run_standalone

HELP = "where the function each task's fix changes ranks among the rewrite stage's suspects (no model)"
LIMIT = 40  # suspects listed per task
OUTPUT_CHARS = 2_000_000


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench localization``."""
    ap.add_argument("--tasks", default="libraries,suites", help="shipped task sets, comma-separated")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds for one task's traced check")
    ap.add_argument("--json", default="out/localization.json", help="results JSON")


def fixed_line(task: AgentTask, solution: str) -> tuple[str, int] | None:
    """``(path, line)`` of the first line the solution changes in a copy of the task's repository."""
    with tempfile.TemporaryDirectory() as tmp:
        fixed = Path(tmp) / "repo"
        shutil.copytree(str(task.repo), fixed)
        subprocess.run(solution, shell=True, cwd=fixed, check=True, capture_output=True, timeout=120)
        for path in sorted(p for p in fixed.rglob("*") if p.is_file()):
            rel = path.relative_to(fixed)
            before = Path(str(task.repo)) / rel
            if not before.is_file() or before.read_bytes() == path.read_bytes():
                continue
            ops = difflib.SequenceMatcher(None, before.read_text().split("\n"), path.read_text().split("\n"))
            first = next(op for op in ops.get_opcodes() if op[0] != "equal")
            return str(rel), first[1] + 1
    return None


def suspects_of(task: AgentTask, timeout: float) -> list[JsonObject]:
    """The suspects the stage's op lists for the pristine repository (at most ``LIMIT``)."""
    sandbox = Sandbox.create(str(task.repo), timeout=timeout)
    try:
        protect(sandbox.workdir_path, check_paths(task))
        out = sandbox.run(task.check or "python3 check.py")
        failures = read_failures(out.output)
        op = {"op": "suspects", "argv": python_check_args(task.check or ""), "failing": failures.tests,
              "tracebacks": [[list(f) for f in tb] for tb in failures.tracebacks], "limit": LIMIT,
              "max_lines": SUSPECT_LINES, "output": out.output[-20_000:], "issue": task.task}
        result = run_program(sandbox, op, OUTPUT_CHARS)
        lines = result.output.strip().splitlines()
        found = json.loads(lines[-1]) if lines else []
        return [d for d in found if isinstance(d, dict)]
    finally:
        sandbox.close()


def run(args: argparse.Namespace) -> int:
    rows: list[JsonObject] = []
    for set_name in [s for s in args.tasks.split(",") if s]:
        solutions = set_solutions(set_name)
        for task in set_tasks(set_name):
            if task.name not in solutions:
                continue
            fix = fixed_line(task, solutions[task.name])
            found = suspects_of(task, args.timeout)
            functions = [d for d in found if d.get("kind") in ("function", "lines")]
            rank = next((i for i, d in enumerate(functions) if fix is not None and d["path"] == fix[0]
                         and int(d["first"]) <= fix[1] <= int(d["last"])), None)
            rows.append({"task": task.name, "set": set_name, "fix": list(fix) if fix else None, "rank": rank,
                         "functions": len(functions), "suspects": found})
            print(f"{task.name}: rank {rank} of {len(functions)}", flush=True)
    print_table(["task", "fix (path:line)", "rank of its function", "function suspects", "first three"],
                [[r["task"], ":".join(map(str, r["fix"] or [])), "none" if r["rank"] is None else r["rank"],
                  r["functions"], ", ".join(str(d["name"]) for d in r["suspects"][:3])] for r in rows])
    ranked = [r["rank"] for r in rows]
    summary = {"tasks": len(rows), "first": sum(1 for r in ranked if r == 0),
               "top4": sum(1 for r in ranked if r is not None and r < 4)}
    print(f"fix's function first for {summary['first']} of {summary['tasks']}, among the first four for "
          f"{summary['top4']}")
    write_json(args.json, {"config": {k: v for k, v in vars(args).items() if k != "func"}, "machine": machine_info(),
                           "summary": summary, "rows": rows})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.localization``: the same as ``agent-engine bench localization``."""
    return run_standalone("localization", argv)


if __name__ == "__main__":
    raise SystemExit(main())
