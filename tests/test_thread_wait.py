"""The engine's OpenMP threads spin briefly, then sleep: the package sets a bounded GOMP_SPINCOUNT
before torch loads, unless the user chose a wait policy (or opted out)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent_engine import thread_wait

pytestmark = pytest.mark.core


def _child_spin(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", thread_wait.OPT_OUT)}
    code = "import os, agent_engine, torch; print(os.environ.get('GOMP_SPINCOUNT', '-'))"
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120,
                         check=True)
    return out.stdout.strip()


def test_importing_the_package_sets_a_bounded_spin_before_torch() -> None:
    assert _child_spin({}) == thread_wait.SPIN_COUNT


@pytest.mark.parametrize(("env", "expected"), [({"GOMP_SPINCOUNT": "7"}, "7"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "-"),
                                               ({thread_wait.OPT_OUT: "default"}, "-")])
def test_a_wait_policy_the_user_chose_wins(env: dict[str, str], expected: str) -> None:
    assert _child_spin(env) == expected
