"""``Any`` outside the engine core, counted per folder against a budget that only goes down.

The engine core has none (``test_engine_annotations``). Everywhere else an annotation names ``Any``
only where a value is really arbitrary and no JSON alias (``agent_engine.json_types``) or ASGI type
(``starlette.types``) says more; the same AST scan counts them here, per folder of ``agent_engine``
(``(top)``: its top-level modules), and each folder stays within its budget (the budgets sum to at most
``TOTAL``). The model runner's and the cluster's signatures have none. When a folder's count drops,
lower its budget to the new count. ``agent`` belongs to another engineer: its budget is its count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_engine_annotations import ENGINE_MODULES, _annotations, _names_any

ROOT = Path(__file__).resolve().parent.parent
TOTAL = 200
BUDGETS = {"server": 66, "workloads": 21, "agent": 62, "sim": 9, "cluster": 0, "model": 13, "cli": 0,
           "routing": 0, "(top)": 2}
NONE_IN = ("agent_engine/model/runner.py", "agent_engine/cluster")

pytestmark = pytest.mark.core


def _count(path: Path) -> int:
    return sum(1 for a in _annotations(ast.parse(path.read_text(), filename=str(path))) if _names_any(a))


def _by_folder() -> dict[str, int]:
    core = {p.resolve() for p in ENGINE_MODULES}
    counts: dict[str, int] = {}
    for path in sorted((ROOT / "agent_engine").rglob("*.py")):
        if path.resolve() in core:
            continue
        rel = path.relative_to(ROOT / "agent_engine")
        folder = rel.parts[0] if len(rel.parts) > 1 else "(top)"
        counts[folder] = counts.get(folder, 0) + _count(path)
    return counts


def test_the_budgets_sum_to_at_most_the_total() -> None:
    assert sum(BUDGETS.values()) <= TOTAL


def test_each_folder_stays_within_its_budget() -> None:
    counts = _by_folder()
    assert set(counts) <= set(BUDGETS), f"a new folder needs a budget: {sorted(set(counts) - set(BUDGETS))}"
    over = {folder: (n, BUDGETS[folder]) for folder, n in counts.items() if n > BUDGETS[folder]}
    assert not over, f"Any annotations over budget (count, budget): {over}"


@pytest.mark.parametrize("where", NONE_IN)
def test_no_any_in_the_runner_nor_the_cluster(where: str) -> None:
    path = ROOT / where
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    assert {f.relative_to(ROOT).as_posix(): n for f in files if (n := _count(f))} == {}
