"""Attention routes chosen by measurement (``kernels.route_calibration``): the crossover rule, the
per-CPU cache (measured once per key, reused, remeasured on request, when unreadable or when its
numbers are outside physical bounds; kept in memory when it cannot be written) and a real measurement
on this CPU whose routes the attention then follows."""

from __future__ import annotations

import importlib
import json
import logging
from pathlib import Path

import pytest
import torch

from kernels import calibration_store, cpp_build, linear_routes, load_cpu_ops, quant_routes, route_calibration
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
        return route_calibration.Calibration(SdpaRoutes(128, 32), {"16": (1.0, 2.0), "128": (2.0, 1.0)},
                                             {"32": (2.0, 1.0)}, route_calibration.cache_key(
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


def _fake_attention(shape: HeadShape, attend: object) -> route_calibration.Calibration:
    return route_calibration.Calibration(SdpaRoutes(64, NEVER), {"16": (1.0, 2.0), "64": (2.0, 1.0)},
                                         {"4": (1.0, 2.0)}, route_calibration.cache_key(shape, torch.get_num_threads()),
                                         "now")


@pytest.fixture
def fresh_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[HeadShape]:
    """An empty cache and route table, and the shapes ``route_calibration.measure`` was called for."""
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(route_calibration._routes, "known", {})
    monkeypatch.setattr(calibration_store, "_unstored", {}, raising=False)
    measured: list[HeadShape] = []

    def fake_measure(shape: HeadShape, attend: object) -> route_calibration.Calibration:
        measured.append(shape)
        return _fake_attention(shape, attend)

    monkeypatch.setattr(route_calibration, "measure", fake_measure)
    return measured


@pytest.mark.core
def test_an_entry_that_cannot_be_written_stays_in_memory_with_one_warning(
        fresh_store: list[HeadShape], caplog: pytest.LogCaptureFixture) -> None:
    """A folder where the entry's file should be (a tampered cache): no IsADirectoryError, no stray
    temporary file; the routes are measured once and kept for the process."""
    path = route_calibration.cache_file(SHAPE, torch.get_num_threads())
    path.mkdir(parents=True)
    (path / "inside").write_text("x")
    with caplog.at_level(logging.WARNING, logger="kernels.calibration_store"):
        assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(64, NEVER)
        route_calibration._routes.known.clear()  # asked again in the process: answered from memory
        assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(64, NEVER)
    assert fresh_store == [SHAPE]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "keeping it in memory" in warnings[0].getMessage()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no tmp*.json left
    assert path.is_dir()


@pytest.mark.core
def test_a_read_only_store_keeps_every_entry_in_memory(fresh_store: list[HeadShape], tmp_path: Path) -> None:
    routes = calibration_store.cache_dir() / "routes"
    routes.parent.mkdir(parents=True)
    routes.write_text("not a folder")  # nothing can be written under it
    assert calibration_store.write_calibration("k" * 20, {"x": 1}) is False
    assert calibration_store.read_calibration("k" * 20) == {"x": 1, "key": "k" * 20}
    assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(64, NEVER)
    assert sorted(p.name for p in calibration_store.cache_dir().iterdir()) == ["routes"]


TAMPERED = [
    ("negative timing", lambda d: d["fresh_ms"].update({"16": [-5.0, 2.0]})),
    ("infinite timing", lambda d: d["context_ms"].update({"4": [float("inf"), 1.0]})),
    ("a timing of hours", lambda d: d["fresh_ms"].update({"64": [2.0, 1e9]})),
    ("absurd threshold", lambda d: d["routes"].update(min_fresh_query=1e30)),
    ("a huge integer threshold", lambda d: d["routes"].update(min_context_query=10**30)),
    ("a threshold never measured", lambda d: d["routes"].update(min_fresh_query=3)),
    ("a threshold of the wrong type", lambda d: d["routes"].update(min_fresh_query=True)),
    ("a timing row of one number", lambda d: d["fresh_ms"].update({"16": [1.0]})),
    ("a size that is no size", lambda d: d["fresh_ms"].update({"-1": [1.0, 2.0]})),
]


@pytest.mark.core
@pytest.mark.parametrize("tamper", [t for _, t in TAMPERED], ids=[n for n, _ in TAMPERED])
def test_stored_numbers_outside_physical_bounds_are_measured_again(fresh_store: list[HeadShape], tamper) -> None:
    route_calibration.calibrate(SHAPE, ATTEND)
    path = route_calibration.cache_file(SHAPE, torch.get_num_threads())
    data = json.loads(path.read_text())
    tamper(data)
    path.write_text(json.dumps(data))
    route_calibration._routes.known.clear()
    assert route_calibration.sdpa_routes(SHAPE, ATTEND) == SdpaRoutes(64, NEVER)
    assert fresh_store == [SHAPE, SHAPE]  # measured again, and the good numbers written back
    assert json.loads(path.read_text())["routes"] == {"min_fresh_query": 64, "min_context_query": NEVER}


@pytest.mark.core
def test_the_matmul_routes_refuse_tampered_numbers_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The same bounds hold for the float32 matmul's and the GGUF matmul's stored routes."""
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    linear = {"onednn_from": 256, "ms": {"1": [1.0, 2.0], "256": [2.0, 1.0]}, "measured_at": "now"}
    assert linear_routes._parse({**linear, "key": "k"}, linear_routes.MatmulShape(4, 4)).onednn_from == 256
    quant = {"wide_from": NEVER, "wide_bf16": False, "ms": {"1": [1.0, 2.0]}, "measured_at": "now", "key": "k"}
    assert quant_routes._parse(quant).wide_from == NEVER
    for bad in ({"onednn_from": -4}, {"onednn_from": 1e30}, {"ms": {"1": [-1.0, 2.0], "256": [2.0, 1.0]}}):
        with pytest.raises(ValueError):
            linear_routes._parse({**linear, **bad, "key": "k"}, linear_routes.MatmulShape(4, 4))
    for bad in ({"wide_from": 2**40}, {"wide_bf16": "yes"}, {"ms": {"1": [float("nan"), 1.0]}}):
        with pytest.raises(ValueError):
            quant_routes._parse({**quant, **bad})
    monkeypatch.setattr(quant_routes, "bf16_products", lambda: False)
    with pytest.raises(ValueError, match="wide_bf16"):
        quant_routes._parse({**quant, "wide_bf16": True})


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


def test_a_bfloat16_cache_has_its_own_calibration(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Under float32 queries a bfloat16 cache is its own shape (timed over a bfloat16 cache: its tiles
    read half the bytes, SDPA widens them), keyed apart; a cache in the queries' dtype keeps the key
    shapes had before caches had their own."""
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(route_calibration._routes, "known", {})
    monkeypatch.setattr(route_calibration, "FRESH_LENGTHS", (16, 64))
    monkeypatch.setattr(route_calibration, "CONTEXT_LENGTHS", (4, 16))
    monkeypatch.setattr(route_calibration, "CONTEXT", 64)
    bf16 = HeadShape(8, 2, 64, "float32", "bfloat16")
    assert route_calibration.cache_key(bf16, 2) != route_calibration.cache_key(HeadShape(8, 2, 64), 2)
    assert route_calibration.cache_key(HeadShape(8, 2, 64), 2) == calibration_store.store_key(
        "attention", route_calibration.VERSION, {"num_q_heads": 8, "num_kv_heads": 2, "head_dim": 64,
                                                 "dtype": "float32"}, 2)
    caches: list[torch.dtype] = []

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, *rest: object) -> object:
        caches.append(k_cache.dtype)
        return ATTEND(q, k, v, k_cache, *rest)

    cal = route_calibration.calibrate(bf16, attend)
    assert set(caches) == {torch.bfloat16} and set(cal.fresh_ms) == {"16", "64"}
    paged_attention = importlib.import_module("kernels.paged_attention")
    monkeypatch.setattr(route_calibration, "measure", lambda *a: pytest.fail("measured again"))
    query, cache = torch.empty(3, 8, 64), torch.empty(4, 16, 2, 64, dtype=torch.bfloat16)
    assert paged_attention.chunk_routes(query, cache) == cal.routes  # the bfloat16 cache's own entry
