"""The package limits glibc's malloc arenas unless the user set MALLOC_ARENA_MAX."""

from __future__ import annotations

import ctypes

import pytest

from agent_engine import malloc_arenas

pytestmark = pytest.mark.core


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.mark.parametrize(("env", "expected"), [({}, [(-8, malloc_arenas.ARENAS)]), ({"MALLOC_ARENA_MAX": "4"}, [])])
def test_arenas_are_limited_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                  expected: list[tuple[int, int]]) -> None:
    libc = _Libc()
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    malloc_arenas.limit_malloc_arenas()
    assert libc.calls == expected


def test_no_glibc_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(name)

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    malloc_arenas.limit_malloc_arenas()
