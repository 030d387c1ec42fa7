"""Held-out bugs: SWE-smith's kinds injected into the shipped libraries' fixed code, then repaired.

The shipped tasks' bugs are known to whoever built the repair; unseen tasks are not. This benchmark
makes new ones the same way unseen tasks are made: each library of ``--tasks`` has its known fix
applied (its tests pass), then ``--bugs`` bugs are injected one at a time (``bug_injection``: a kind
drawn in turn from ``--kinds``, a place drawn at random with ``--seed``) into its package code, never
its tests. An injection counts only when the check then fails some tests and passes others (it ran,
was not cut by the timeout, did not break every test). Each becomes a task (a generic issue text
that names no file) written under ``--out-dir`` with a ``tasks.jsonl`` the agent commands take
(``agent-engine bench agent-tasks --tasks DIR/tasks.jsonl``), and the rewrite stage repairs it: mutants
alone by default (no model), or mutants and the model's rewrites with ``--base-url`` (a running
``agent-engine serve``). The judge says solved. The table gives each bug's kind, place and outcome,
the summary the count per kind.

Invariants: the judge's verdict alone counts a task solved; a library whose fixed code fails its own
check is skipped with its reason; the same seed draws the same bugs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from agent_engine.agent.check_score import ran_count, score
from agent_engine.agent.file_tool import is_test_path
from agent_engine.agent.rewrites import (
    DEFAULT_MUTANTS,
    DEFAULT_REWRITE_FUNCTIONS,
    DEFAULT_REWRITE_SAMPLES,
    RewritePolicy,
)
from agent_engine.agent.sandbox import Sandbox
from agent_engine.agent.task_set import AgentTask, set_solutions, set_tasks
from agent_engine.json_types import JsonObject
from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.bug_injection import KINDS, Injection, injections
from benchmarks.cli import run_standalone
from benchmarks.mutation_repair import repaired

HELP = "bugs of SWE-smith's kinds injected into the shipped libraries, repaired by the rewrite stage"
ISSUE = ("Some of this library's tests fail since a recent change to its code. `python3 check.py` runs the "
         "library's test suite and exits 0 once every test passes; the tests are read-only.")
TRIES = 8  # injections of one kind tried per bug before giving up on it


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench injected``."""
    ap.add_argument("--tasks", default="libraries,suites", help="shipped task sets whose libraries get bugs")
    ap.add_argument("--only", default="", help="comma-separated library task names (default: all)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="bug kinds, drawn in turn")
    ap.add_argument("--bugs", type=int, default=2, help="bugs injected per library (one task each)")
    ap.add_argument("--seed", type=int, default=0, help="draws the bugs' places")
    ap.add_argument("--mutants", type=int, default=DEFAULT_MUTANTS, help="mutants tried per task, at most")
    ap.add_argument("--functions", type=int, default=DEFAULT_REWRITE_FUNCTIONS, help="suspects mutated, at most")
    ap.add_argument("--base-url", default="", help="a running server: the model's rewrites follow the mutants")
    ap.add_argument("--rewrites", type=int, default=DEFAULT_REWRITE_SAMPLES, help="rewrites per suspect with --base-url")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for one command in the sandbox")
    ap.add_argument("--out-dir", default="out/injected", help="the injected tasks: repos and tasks.jsonl")
    ap.add_argument("--json", default="out/injected_repair.json", help="results JSON")


def check_counts(task: AgentTask, repo: Path, timeout: float) -> tuple[int, int] | None:
    """``(tests run, tests failed or errored)`` of the task's check on ``repo`` as its output states them
    (``check_score``); None when it timed out or states no count."""
    sandbox = Sandbox.create(str(repo), timeout=timeout)
    try:
        out = sandbox.run(task.check or "python3 check.py")
    finally:
        sandbox.close()
    ran, failing = ran_count(out.output), score(out.exit_code, out.output).failing
    return None if out.timed_out or ran is None or failing is None else (ran, failing)


def fixed_copy(task: AgentTask, solution: str, into: Path) -> Path | None:
    """A copy of the task's repository with its known fix applied; None when the fix does not apply."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(str(task.repo), into)
    done = subprocess.run(solution, shell=True, cwd=into, capture_output=True, timeout=120, check=False)
    return into if done.returncode == 0 else None


def package_files(task: AgentTask, repo: Path) -> list[Path]:
    """The repository's Python files outside its check and tests (where bugs may go)."""
    held = [repo / p for p in (*(task.check_files or ()), *(task.tests or ()), "setup.py", "docs")]
    return sorted(p for p in repo.rglob("*.py")
                  if not any(p == h or h in p.parents for h in held) and not is_test_path(str(p.relative_to(repo))))


def inject_bugs(task: AgentTask, fixed: Path, kinds: list[str], first: int, args: argparse.Namespace,
                rng: random.Random) -> list[tuple[AgentTask, Injection, str]]:
    """Up to ``args.bugs`` valid injected tasks of ``task``'s library; bug ``k`` takes the kinds in turn
    from ``first + k`` until one gives a valid bug (``TRIES`` places drawn per kind)."""
    made: list[tuple[AgentTask, Injection, str]] = []
    files = package_files(task, fixed)
    for k in range(args.bugs):
        for kind in (kinds[(first + k + j) % len(kinds)] for j in range(len(kinds))):
            found = _valid_bug(task, fixed, files, kind, f"{task.name}__{kind}_{k}", args, rng)
            if found is not None:
                made.append(found)
                break
    return made


def _valid_bug(task: AgentTask, fixed: Path, files: list[Path], kind: str, name: str, args: argparse.Namespace,
               rng: random.Random) -> tuple[AgentTask, Injection, str] | None:
    """The first of ``TRIES`` drawn places of ``kind`` whose bug fails some of the check's tests and not all."""
    candidates = [(f, inj) for f in files for inj in injections(f.read_text(encoding="utf-8"), kind, rng)]
    rng.shuffle(candidates)
    repo = Path(args.out_dir) / name
    for path, injection in candidates[:TRIES]:
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(fixed, repo)
        (repo / path.relative_to(fixed)).write_text(injection.text, encoding="utf-8")
        counts = check_counts(task, repo, args.timeout)
        if counts is not None and 0 < counts[1] < counts[0]:
            bugged = AgentTask(task=ISSUE, repo=str(repo), check=task.check, name=name,
                               check_files=task.check_files, tests=task.tests)
            return bugged, injection, str(path.relative_to(fixed))
    shutil.rmtree(repo, ignore_errors=True)
    return None


def write_task_file(out_dir: Path, made: list[tuple[AgentTask, Injection, str]]) -> Path:
    """``tasks.jsonl`` of the injected tasks, their repos as absolute paths (for ``--tasks FILE``)."""
    path = out_dir / "tasks.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for task, _, _ in made:
            repo = str(Path(str(task.repo)).resolve())
            f.write(json.dumps({"name": task.name, "kind": "injected bug", "task": task.task, "repo": repo,
                                "check": task.check, "check_files": list(task.check_files or ()),
                                **({"tests": list(task.tests)} if task.tests else {})}) + "\n")
    return path


def run(args: argparse.Namespace) -> int:
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown bug kinds {unknown}; known: {', '.join(KINDS)}")
    rng = random.Random(args.seed)
    only = {n for n in args.only.split(",") if n}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[tuple[AgentTask, Injection, str]] = []
    skipped: list[JsonObject] = []
    for set_name in [s for s in args.tasks.split(",") if s]:
        solutions = set_solutions(set_name)
        for task in set_tasks(set_name):
            if task.check is None or task.name not in solutions or only and task.name not in only:
                continue
            fixed = fixed_copy(task, solutions[task.name], out_dir / "_fixed" / str(task.name))
            counts = check_counts(task, fixed, args.timeout) if fixed is not None else None
            if fixed is None or counts is None or counts[1] or not counts[0]:
                why = "its known fix does not apply" if fixed is None else f"the fixed code's check gave {counts}"
                skipped.append({"task": task.name, "why": why})
                continue
            found = inject_bugs(task, fixed, kinds, len(made), args, rng)
            made += found
            print(f"{task.name}: {len(found)} bugs injected ({', '.join(i.kind for _, i, _ in found)})", flush=True)
    write_task_file(out_dir, made)
    policy = RewritePolicy(samples=args.rewrites if args.base_url else 0, functions=args.functions,
                           mutants=args.mutants)
    rows: list[JsonObject] = []
    for task, injection, path in made:
        row = {"kind": injection.kind, "file": path, "function": injection.function, "line": injection.line,
               **repaired(task, policy, args.timeout, base_url=args.base_url or None)}
        rows.append(row)
        print(f"{task.name}: {'solved' if row['solved'] else 'not solved'} ({row['tried']} mutants, "
              f"{row['seconds']} s)", flush=True)
    print_table(["task", "kind", "function", "solved", "mutants tried", "seconds", "how"],
                [[r["task"], r["kind"], f"{r['file']}:{r['line']} {r['function']}", r["solved"], r["tried"],
                  r["seconds"], str(r["mutant"] or r["exit_status"])[:60]] for r in rows])
    by_kind = {k: {"bugs": sum(1 for r in rows if r["kind"] == k),
                   "solved": sum(1 for r in rows if r["kind"] == k and r["solved"])} for k in kinds}
    summary = {"bugs": len(rows), "solved": sum(1 for r in rows if r["solved"]), "by_kind": by_kind,
               "seconds": round(sum(float(r["seconds"]) for r in rows), 1), "skipped": skipped}
    print_table(["kind", "bugs", "solved"], [[k, v["bugs"], v["solved"]] for k, v in by_kind.items()])
    print(f"solved {summary['solved']} of {summary['bugs']} injected bugs in {summary['seconds']} s")
    write_json(args.json, {"config": {k: v for k, v in vars(args).items() if k != "func"}, "machine": machine_info(),
                           "summary": summary, "rows": rows})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.injected_repair``: the same as ``agent-engine bench injected``."""
    return run_standalone("injected", argv)


if __name__ == "__main__":
    raise SystemExit(main())
