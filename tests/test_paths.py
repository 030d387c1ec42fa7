"""One cache root for the whole engine: the kernels' builds and routes live under the root the models
use, whichever environment variable names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_engine.paths import ENV_CACHE, cache_root
from kernels.cpp_build import cache_dir

pytestmark = pytest.mark.core


@pytest.mark.parametrize("explicit, xdg", [(True, True), (True, False), (False, True), (False, False)])
def test_kernels_cache_is_under_the_engines_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       explicit: bool, xdg: bool) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name, value, on in ((ENV_CACHE, tmp_path / "explicit", explicit), ("XDG_CACHE_HOME", tmp_path / "xdg", xdg)):
        if on:
            monkeypatch.setenv(name, str(value))
        else:
            monkeypatch.delenv(name, raising=False)
    assert cache_dir() == cache_root() / "kernels"
    expected = "explicit" if explicit else "xdg/agent-engine" if xdg else "home/.cache/agent-engine"
    assert cache_root() == tmp_path / expected
