"""The package sets glibc's malloc (two arenas, freed memory kept) unless the user chose otherwise."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from agent_engine import malloc_settings
from agent_engine.malloc_settings import ARENAS, M_ARENA_MAX, M_MMAP_MAX, M_TRIM_THRESHOLD, TRIM_THRESHOLD

pytestmark = pytest.mark.core
HEAP = [(M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD)]


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.mark.parametrize(("env", "expected"), [
    ({}, [(M_ARENA_MAX, ARENAS), *HEAP]),
    ({"MALLOC_ARENA_MAX": "4"}, HEAP),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, [(M_ARENA_MAX, ARENAS)]),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_max=8"}, [(M_ARENA_MAX, ARENAS)]),
    ({"GLIBC_TUNABLES": "glibc.rtld.nns=2"}, [(M_ARENA_MAX, ARENAS), *HEAP]),  # not a malloc tunable
    ({"MALLOC_ARENA_MAX": "4", "MALLOC_MMAP_MAX_": "1"}, []),
])
def test_defaults_apply_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                              expected: list[tuple[int, int]]) -> None:
    libc = _Libc()
    for name in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", *malloc_settings._HEAP_POLICY_ENV):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    malloc_settings.tune_malloc()
    assert libc.calls == expected


def test_no_glibc_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(name)

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    malloc_settings.tune_malloc()


def test_a_child_process_inherits_nothing() -> None:
    """The settings live in this process's allocator: a child's environment has no malloc variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    code = "import agent_engine, os; print(sorted(k for k in os.environ if k.startswith(('MALLOC_', 'GLIBC_'))))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
