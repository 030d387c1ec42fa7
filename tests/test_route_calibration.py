"""Attention routes chosen by measurement (``kernels.route_calibration``): the crossover rule, the
per-CPU cache (measured once per key, reused, remeasured on request or when unreadable) and a real
measurement on this CPU whose routes the attention then follows."""

from __future__ import annotations

import importlib
import json

import pytest
import torch

from kernels import cpp_build, load_cpu_ops, route_calibration
from kernels.route_calibration import NEVER, HeadShape, SdpaRoutes, crossover

SHAPE = HeadShape(8, 2, 64)
ATTEND = importlib.import_module("kernels.paged_attention").paged_attention_cpp


@pytest.mark.core
@pytest.mark.parametrize("cpp,sdpa,expected", [
    ([1, 2, 4, 8], [2, 3, 3, 4], 64),  # SDPA wins from 64 on
    ([1, 2, 4, 8], [2, 3, 5, 9], NEVER),  # the C++ tiles win everywhere
    ([5, 5, 5, 5], [1, 1, 1, 1], 16),  # SDPA everywhere
    ([1, 5, 4, 8], [2, 3, 5, 4], 128),  # a win at 32 that does not hold at 64 does not count
    ([1, 2, 4, 8], [2, 3, 3.9, 7.9], NEVER),  # within the margin: the C++ route stays
])
def test_crossover_is_where_sdpa_wins_from_then_on(cpp: list[float], sdpa: list[float], expected: int) -> None:
    assert crossover([16, 32, 64, 128], cpp, sdpa) == expected


@pytest.mark.core
def test_a_calibration_is_measured_once_per_key_and_cached(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(route_calibration._routes, "known", {})
    measured: list[HeadShape] = []

    def fake_measure(shape: HeadShape, attend: object) -> route_calibration.Calibration:
        measured.append(shape)
        return route_calibration.Calibration(SdpaRoutes(128, 32), {"16": (1.0, 2.0)}, {}, route_calibration.cache_key(
            shape, torch.get_num_threads()), "now")

    monkeypatch.setattr(route_calibration, "measure", fake_measure)
    assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(128, 32)
    assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(128, 32)
    assert measured == [SHAPE]
    monkeypatch.setattr(route_calibration._routes, "known", {})  # a new process reads the file
    assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(128, 32)
    assert measured == [SHAPE]
    other = HeadShape(12, 2, 128)
    assert route_calibration.cache_key(other, 2) != route_calibration.cache_key(SHAPE, 2)
    assert route_calibration.cache_key(SHAPE, 1) != route_calibration.cache_key(SHAPE, 2)
    route_calibration.calibrate(SHAPE, ATTEND, remeasure=True)
    assert measured == [SHAPE, SHAPE]
    path = route_calibration.cache_file(SHAPE, torch.get_num_threads())
    path.write_text("{not json")
    monkeypatch.setattr(route_calibration._routes, "known", {})
    route_calibration.sdpa_routes(SHAPE, ATTEND)
    assert measured == [SHAPE, SHAPE, SHAPE]
    assert json.loads(path.read_text())["routes"] == {"min_fresh_query": 128, "min_context_query": 32}


@pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")
def test_a_real_calibration_drives_the_routes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Measured here: every length timed on both routes, the routes follow the crossover rule, and the
    attention of a chunk plans by them."""
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(route_calibration._routes, "known", {})
    monkeypatch.setattr(route_calibration, "FRESH_LENGTHS", (16, 64, 256))
    monkeypatch.setattr(route_calibration, "CONTEXT_LENGTHS", (4, 16, 64))
    monkeypatch.setattr(route_calibration, "CONTEXT", 256)
    cal = route_calibration.calibrate(SHAPE, ATTEND)
    assert set(cal.fresh_ms) == {"16", "64", "256"} and set(cal.context_ms) == {"4", "16", "64"}
    assert all(c > 0 and s > 0 for c, s in [*cal.fresh_ms.values(), *cal.context_ms.values()])
    fresh = [cal.fresh_ms[str(n)] for n in (16, 64, 256)]
    assert cal.routes.min_fresh_query == crossover((16, 64, 256), [c for c, _ in fresh], [s for _, s in fresh])
    paged_attention = importlib.import_module("kernels.paged_attention")
    query, cache = torch.empty(3, 8, 64), torch.empty(4, 16, 2, 64)
    assert paged_attention.chunk_routes(query, cache) == cal.routes
    monkeypatch.setattr(paged_attention, "SDPA_MIN_FRESH_QUERY", 7)
    assert paged_attention.chunk_routes(query, cache) == SdpaRoutes(7, cal.routes.min_context_query)
