"""The mutants benchmark on one shipped library: its phase alone solves it, judged, with no model."""

from __future__ import annotations

from agent_engine.agent.rewrites import MUTANT_PASSED, RewritePolicy
from agent_engine.agent.task_set import set_tasks
from benchmarks.mutation_repair import repaired


def test_a_library_s_narrow_except_is_fixed_by_a_mutant_and_judged_solved() -> None:
    task = next(t for t in set_tasks("libraries") if t.name == "toolz_missing_index_default")
    row = repaired(task, RewritePolicy(samples=0, functions=4, mutants=20), timeout=120)
    assert row["solved"] is True and row["exit_status"] == MUTANT_PASSED, row
    assert 1 <= int(row["tried"]) <= 20 and "IndexError" in str(row["mutant"])


def test_a_phase_that_finds_nothing_leaves_the_task_unsolved() -> None:
    task = next(t for t in set_tasks("libraries") if t.name == "toolz_missing_index_default")
    row = repaired(task, RewritePolicy(samples=0, functions=4, mutants=1), timeout=120)
    assert row["solved"] is False and row["tried"] == 1 and row["mutant"] == ""
