"""``bench prompt``: fresh prompts of the asked length, the best run per server, ratios in one run."""

from __future__ import annotations

import pytest

from benchmarks.prompt_speed import LLAMA, _rows, prompt_text

pytestmark = pytest.mark.core


def test_prompts_are_fresh_and_about_the_asked_length() -> None:
    a, b = prompt_text(512, "agent-engine 512 0 1"), prompt_text(512, "agent-engine 512 0 2")
    assert a.splitlines()[0] != b.splitlines()[0]  # no shared first block: no cached prefix
    assert 480 <= len(a.split()) <= 512


def test_rows_hold_each_servers_best_and_the_ratio() -> None:
    best = {("agent-engine", 512): {"prompt_tps": 200.0}, (LLAMA, 512): {"prompt_tps": 100.0}}
    assert _rows(["agent-engine", LLAMA], [512], best)[0]["ratio"] == 2.0
    assert "ratio" not in _rows(["agent-engine"], [512], best)[0]
