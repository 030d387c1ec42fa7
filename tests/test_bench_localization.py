"""The localization benchmark on one shipped suite: the fix's line is found, and its function ranks first."""

from __future__ import annotations

from agent_engine.agent.task_set import set_solutions, set_tasks
from benchmarks.localization import fixed_line, suspects_of


def test_the_function_a_suite_s_fix_changes_is_the_first_suspect() -> None:
    task = next(t for t in set_tasks("suites") if t.name == "linalg_det_sign")
    fix = fixed_line(task, set_solutions("suites")[task.name])
    assert fix is not None and fix[0] == "linalg/elimination.py"
    found = suspects_of(task, timeout=120)
    first = next(d for d in found if d["kind"] in ("function", "lines"))
    assert first["name"] == "determinant" and int(first["first"]) <= fix[1] <= int(first["last"])
    assert all(not str(d["path"]).startswith("tests") and d["path"] != "check.py" for d in found)
