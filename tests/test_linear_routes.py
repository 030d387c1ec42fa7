"""Matmul routes chosen by measurement (``kernels.linear_routes``): panels or oneDNN by row count per
weight shape, measured once per CPU and cached, never measured on a matmul's own path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels import calibration_store, cpp_build, linear_routes, load_cpu_ops, prepack
from kernels.calibration_store import NEVER
from kernels.cpu_ops import gate_up_silu, linear
from kernels.linear_routes import LinearCalibration, LinearRoute, MatmulShape

needs_cpp = pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")


@pytest.fixture
def fresh_routes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(linear_routes._routes, "known", {})


@pytest.mark.core
def test_the_ladder_stops_at_the_flop_budget() -> None:
    assert linear_routes.ladder(MatmulShape(64, 64)) == linear_routes.ROWS
    head = linear_routes.ladder(MatmulShape(151_936, 896))  # a vocabulary-sized LM head
    next_rung = linear_routes.ROWS[len(head)]
    assert head[0] == 1 and max(head) * 2 * 151_936 * 896 <= linear_routes.FLOP_BUDGET < next_rung * 2 * 151_936 * 896
    assert linear_routes.ladder(MatmulShape(10**7, 10**4)) == (1,)  # always at least one row count


@pytest.mark.core
def test_an_unprepared_shape_stays_on_the_panels(fresh_routes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is measured on a matmul's path: a shape nobody prepared answers NEVER."""
    monkeypatch.setattr(linear_routes, "measure", lambda shape: pytest.fail("measured on the matmul path"))
    assert linear_routes.onednn_from(96, 40) == NEVER


@pytest.mark.core
def test_prepare_measures_each_shape_once_and_caches_it(fresh_routes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[MatmulShape] = []

    def fake_measure(shape: MatmulShape) -> LinearCalibration:
        measured.append(shape)
        return LinearCalibration(256, {"256": (2.0, 1.0)}, linear_routes.cache_key(shape, torch.get_num_threads()), "now")

    monkeypatch.setattr(linear_routes, "measure", fake_measure)
    a, b = MatmulShape(96, 40), MatmulShape(40, 96)
    linear_routes.prepare([a, b, a])
    assert measured == [a, b]
    assert linear_routes.onednn_from(96, 40) == 256 and linear_routes.onednn_from(40, 96) == 256
    monkeypatch.setattr(linear_routes._routes, "known", {})  # a new process reads the files
    linear_routes.prepare([a])
    assert measured == [a, b] and linear_routes.onednn_from(96, 40) == 256
    assert linear_routes.cache_key(a, 1) != linear_routes.cache_key(a, 2) != linear_routes.cache_key(b, 2)
    calibration_store.store_path(linear_routes.cache_key(a, torch.get_num_threads())).write_text("{not json")
    monkeypatch.setattr(linear_routes._routes, "known", {})
    linear_routes.prepare([a])
    assert measured == [a, b, a]  # an unreadable file is measured again


@needs_cpp
@pytest.mark.parametrize("rows", [1, 64, 300])
def test_both_routes_give_the_same_product(fresh_routes: None, rows: int) -> None:
    """Whichever route a row count takes, ``linear`` returns ``F.linear``'s product (bias included)."""
    gen = torch.Generator().manual_seed(rows)
    x, w, b = torch.randn(rows, 96, generator=gen), torch.randn(200, 96, generator=gen), torch.randn(200, generator=gen)
    packed = prepack.pack_weight(w)
    expected = F.linear(x, w, b)
    panels = linear(x, w, b, True, packed)
    linear_routes._routes.known[(MatmulShape(200, 96).route_key, torch.get_num_threads())] = LinearRoute(64)  # oneDNN from 64
    routed = linear(x, w, b, True, packed)
    torch.testing.assert_close(panels, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(routed, expected, rtol=1e-4, atol=1e-4)
    bf16 = w.bfloat16()  # a bfloat16 weight's panels: x rounded where they are pairs, float32 sums
    x_in = x.bfloat16().float() if cpp_build.bf16_products() else x
    bf16_panels = prepack.pack_weight(bf16)
    torch.testing.assert_close(linear(x, bf16, None, True, bf16_panels), F.linear(x_in, bf16.float()),
                               rtol=1e-4, atol=1e-4)
    if not linear_routes.onednn_has("bfloat16"):
        return  # oneDNN multiplies bfloat16 natively only with AVX512_BF16 or AMX: no such route here
    linear_routes._routes.known[(MatmulShape(200, 96, "bfloat16").route_key, torch.get_num_threads())] = LinearRoute(64)
    routed_bf16 = linear(x, bf16, b, True, bf16_panels)  # oneDNN from 64 rows: the product rounded to bf16
    exact = F.linear(x.bfloat16().float(), bf16.float(), b)
    assert routed_bf16.dtype == torch.float32
    torch.testing.assert_close(routed_bf16, exact, rtol=2**-7, atol=2**-7 * exact.abs().max().item())
    product = linear(x, bf16, None, True, bf16_panels)  # which route ran shows in the product's last bits
    assert torch.equal(product, product.bfloat16().float()) == (rows >= 64)


@needs_cpp
def test_a_real_calibration_follows_the_crossover_rule(fresh_routes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16, 128))
    cal = linear_routes.calibrate(MatmulShape(200, 96))
    assert set(cal.ms) == {"1", "16", "128"} and all(p > 0 and o > 0 for p, o in cal.ms.values())
    times = [cal.ms[str(n)] for n in (1, 16, 128)]
    assert cal.onednn_from == calibration_store.crossover_size(
        (1, 16, 128), [p for p, _ in times], [o for _, o in times], linear_routes.MARGIN)
    assert linear_routes.onednn_from(200, 96) == cal.onednn_from


@needs_cpp
@pytest.mark.skipif(not linear_routes.onednn_has("bfloat16"),
                    reason="oneDNN has no native bfloat16 on this CPU (needs AVX512_BF16 or AMX)")
def test_a_bfloat16_weight_is_measured_as_its_own_shape(fresh_routes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bfloat16 weight has its own calibration (its panels and oneDNN's bfloat16 matmul: on a CPU with
    AMX oneDNN's tiles), under another key than the float32 weight of the same size."""
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16, 128))
    bf16 = MatmulShape.of(torch.zeros(200, 96, dtype=torch.bfloat16))
    assert bf16 == MatmulShape(200, 96, "bfloat16")
    assert linear_routes.cache_key(bf16, 2) != linear_routes.cache_key(MatmulShape(200, 96), 2)
    assert linear_routes.cache_key(MatmulShape(200, 96), 2) == calibration_store.store_key(  # float32's key as before
        "linear", linear_routes.VERSION, {"out_features": 200, "in_features": 96}, 2)
    cal = linear_routes.calibrate(bf16)
    assert set(cal.ms) == {"1", "16", "128"} and all(min(ms) > 0 for ms in cal.ms.values())
    columns = 3 if linear_routes.tiles_have(bf16) else 2  # panels, oneDNN[, the AMX tiles where granted]
    assert all(len(ms) == columns for ms in cal.ms.values())
    assert linear_routes.onednn_from(200, 96, torch.bfloat16) == cal.onednn_from
    assert linear_routes.onednn_from(200, 96) == NEVER  # the float32 shape was not prepared
    with pytest.raises(ValueError, match="float16"):
        MatmulShape.of(torch.zeros(4, 4, dtype=torch.float16))


@needs_cpp
def test_without_native_bfloat16_a_bfloat16_weight_stays_on_its_panels(fresh_routes: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Where oneDNN has no native bfloat16 (an AVX2 CPU) its bfloat16 matmul is never called: the route is
    timed as absent (infinite), stored so, and read back so."""
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16))
    monkeypatch.setattr(linear_routes, "native_bf16", lambda: False)
    monkeypatch.setattr(linear_routes, "onednn_linear", lambda *a: pytest.fail("oneDNN bfloat16 called"))
    shape = MatmulShape(200, 96, "bfloat16")
    cal = linear_routes.calibrate(shape)
    assert cal.onednn_from == NEVER and all(ms[1] == float("inf") for ms in cal.ms.values())
    monkeypatch.setattr(linear_routes._routes, "known", {})
    assert linear_routes.calibrate(shape) == cal  # the stored infinite column is accepted


@needs_cpp
def test_a_gated_gate_up_weight_is_timed_and_routed_with_its_silu(fresh_routes: None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused gate/up weight whose panels run with the SiLU is its own shape (key, calibration, route):
    timed as ``panel_linear_silu`` against oneDNN's product then ``silu_and_mul``, and
    ``gate_up_silu`` follows its route, giving the activation either way; a plain gate/up shape keeps
    its key, and an intermediate size off the panel width is a ValueError."""
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16, 128))
    gated, plain = MatmulShape(64, 96, gated=True), MatmulShape(64, 96)
    assert linear_routes.cache_key(gated, 2) != linear_routes.cache_key(plain, 2)
    assert linear_routes.cache_key(plain, 2) == calibration_store.store_key(
        "linear", linear_routes.VERSION, {"out_features": 64, "in_features": 96}, 2)
    called: list[str] = []

    def onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
               prepacked: torch.Tensor | None = None) -> torch.Tensor:
        called.append("onednn")
        return F.linear(x, w, b)

    monkeypatch.setattr(linear_routes, "onednn_linear", onednn)  # the calibration's and gate_up_silu's
    monkeypatch.setattr("kernels.cpu_ops.onednn_linear", onednn)
    cal = linear_routes.calibrate(gated)
    assert set(cal.ms) == {"1", "16", "128"} and all(p > 0 and o > 0 for p, o in cal.ms.values())
    assert called and linear_routes.onednn_from(64, 96, torch.float32, gated=True) == cal.onednn_from
    assert linear_routes.onednn_from(64, 96) == NEVER  # the plain shape was not prepared
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(20, 96, generator=gen), torch.randn(64, 96, generator=gen)
    gate, up = F.linear(x, w[:32]), F.linear(x, w[32:])
    expected = F.silu(gate) * up
    interleaved = prepack.pack_gate_up(w, 32)
    assert interleaved is not None
    for onednn_from in (NEVER, 16):  # panels, then oneDNN from 16 rows
        linear_routes._routes.known[(gated.route_key, torch.get_num_threads())] = LinearRoute(onednn_from)
        called.clear()
        torch.testing.assert_close(gate_up_silu(x, w, interleaved), expected, rtol=1e-4, atol=1e-4)
        assert called == ([] if onednn_from == NEVER else ["onednn"])
    with pytest.raises(ValueError, match="multiple of 16"):
        MatmulShape(40, 96, gated=True)


@needs_cpp
def test_the_tile_route_is_taken_from_its_row_count_and_ahead_of_onednn(fresh_routes: None) -> None:
    """A route with oneDNN from 4 rows and the tiles from 8: ``linear`` and ``gate_up_silu`` take the
    panels, oneDNN, then the tiles (without granted tiles the tile call raises: the dispatch shows);
    ``takes_onednn`` holds only while oneDNN has row counts of its own."""
    if not cpp_build.tile_kernels():
        pytest.skip("the kernels in use have no AMX tile matmuls (a build for AVX512_BF16 by a compiler that knows AMX)")
    from kernels.amx import amx_state

    gen = torch.Generator().manual_seed(11)
    w = torch.randn(64, 96, generator=gen).bfloat16()
    packed, interleaved = prepack.pack_weight(w), prepack.pack_gate_up(w, 32)
    threads = torch.get_num_threads()
    route = LinearRoute(4, 8)
    assert [route.at(r).value for r in (1, 4, 8, 300)] == ["panels", "onednn", "tiles", "tiles"]
    linear_routes._routes.known[(MatmulShape(64, 96, "bfloat16").route_key, threads)] = route
    linear_routes._routes.known[(MatmulShape(64, 96, "bfloat16", gated=True).route_key, threads)] = route
    assert linear_routes.takes_onednn(w) and linear_routes.takes_onednn(w, gated=True)
    x = torch.randn(8, 96, generator=gen)
    if amx_state().usable:
        by_tiles = torch.empty(8, 64)
        cpp_build.ops().panel_linear_tiles(by_tiles, x, packed, False, True)
        torch.testing.assert_close(linear(x, w, None, True, packed), by_tiles, rtol=1e-5, atol=1e-5)
    else:
        with pytest.raises(RuntimeError, match="no AMX-BF16 tiles granted"):
            linear(x, w, None, True, packed)
        with pytest.raises(RuntimeError, match="no AMX-BF16 tiles granted"):
            gate_up_silu(x, w, interleaved)
    linear_routes._routes.known[(MatmulShape(64, 96, "bfloat16").route_key, threads)] = LinearRoute(8, 8)
    assert not linear_routes.takes_onednn(w)  # the tiles take every row count oneDNN would


@needs_cpp
def test_a_calibration_with_tiles_times_three_routes_and_reads_back(fresh_routes: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tile route present (faked: a call that costs nothing) it wins from the first row count,
    the table has three columns and reads back the same; where the tiles are absent a stored three-column
    table is refused."""
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16, 128))
    monkeypatch.setattr(linear_routes, "tiles_have", lambda shape: True)
    real = linear_routes._routes_of
    monkeypatch.setattr(linear_routes, "_routes_of",
                        lambda shape, weight: (*real(shape, weight)[:2], lambda x, out: None))
    shape = MatmulShape(64, 96)
    cal = linear_routes.calibrate(shape)
    assert all(len(ms) == 3 for ms in cal.ms.values()) and cal.tiles_from == 1
    assert linear_routes.route_of(64, 96) == cal.route
    monkeypatch.setattr(linear_routes._routes, "known", {})
    monkeypatch.setattr(linear_routes, "measure", lambda shape: pytest.fail("measured again"))
    assert linear_routes.calibrate(shape) == cal
    monkeypatch.setattr(linear_routes, "tiles_have", lambda shape: False)
    stored = {"onednn_from": NEVER, "tiles_from": 1, "ms": {"1": [1.0, 2.0, 0.5]}, "key": "k", "measured_at": "now"}
    with pytest.raises(ValueError):
        linear_routes._parse(stored, shape)


@needs_cpp
def test_a_bfloat16_lm_head_is_timed_without_onednn(fresh_routes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An LM head keeps float32 sums: as a bfloat16 ``logits`` shape oneDNN (which rounds its product) is
    never called, its column is absent (infinite), and the head's key is its own."""
    monkeypatch.setattr(linear_routes, "ROWS", (1, 16))
    monkeypatch.setattr(linear_routes, "onednn_linear", lambda *a, **k: pytest.fail("oneDNN called for a head"))
    head = MatmulShape(200, 96, "bfloat16", logits=True)
    assert linear_routes.cache_key(head, 2) != linear_routes.cache_key(MatmulShape(200, 96, "bfloat16"), 2)
    cal = linear_routes.calibrate(head)
    assert cal.onednn_from == NEVER and all(ms[1] == float("inf") for ms in cal.ms.values())
    assert linear_routes.route_of(200, 96, torch.bfloat16, logits=True) == cal.route


@needs_cpp
def test_a_stored_route_a_shape_cannot_take_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored calibration that sends a bfloat16 LM head to oneDNN, or any shape to the tiles where they
    are no route, is treated as corrupt (measured again), never followed."""
    monkeypatch.setattr(linear_routes, "tiles_have", lambda shape: False)
    head = MatmulShape(200, 96, "bfloat16", logits=True)
    to_onednn = {"onednn_from": 1, "ms": {"1": [2.0, 1.0]}, "key": "k", "measured_at": "now"}
    with pytest.raises(ValueError, match="oneDNN"):
        linear_routes._parse(to_onednn, head)
    to_tiles = {"onednn_from": NEVER, "tiles_from": 1, "ms": {"1": [2.0, 1.0]}, "key": "k", "measured_at": "now"}
    with pytest.raises(ValueError, match="tile"):
        linear_routes._parse(to_tiles, MatmulShape(200, 96))


def test_an_lm_head_is_timed_at_the_decode_widths_whatever_its_size() -> None:
    head = MatmulShape(151_936, 896, "bfloat16", logits=True)
    assert set(r for r in linear_routes.ROWS if r <= linear_routes.HEAD_DECODE_ROWS) <= set(linear_routes.ladder(head))
    assert max(linear_routes.ladder(MatmulShape(151_936, 896, "bfloat16"))) < linear_routes.HEAD_DECODE_ROWS
