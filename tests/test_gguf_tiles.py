"""The wide route's AMX tile form on GGUF blocks (``gguf_linear_tiles``): the product of x and the
dequantized weights, both rounded to bfloat16, up to float32 summation order, for every served type,
at row counts below, at and past the 32-row blocks, over K in one and in several blocks, with fused
parts of mixed types writing their own columns of a wider output.

The tile program runs on a scalar model of the AMX instructions (``emulate=True``) on every CPU whose
kernels have bfloat16 products, so its layout, blocking and edges are checked everywhere; on the
tiles themselves only where the CPU has AMX and Linux grants the tile state (skipped, with the
reason, elsewhere), where it must also agree with the model. A call for the hardware without the
tiles raises, never faults."""

from __future__ import annotations

import pytest
import torch

from benchmarks.quant_bench import random_blocks
from kernels import amx
from kernels.cpp_build import load_cpu_ops, ops, tile_kernels
from kernels.quant import GGML_BLOCKS, QuantWeight

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build"),
              pytest.mark.skipif(not (load_cpu_ops() and tile_kernels()),
                                 reason="the tile kernels are built with AVX512_BF16 kernels by a compiler that knows AMX")]
TYPES = sorted(GGML_BLOCKS)
TYPE_IDS = [GGML_BLOCKS[t][0] for t in TYPES]
GRANTED = amx.amx_state().usable
needs_tiles = pytest.mark.skipif(not GRANTED, reason=f"no AMX tiles here ({amx.describe()})")


def weight(qtype: int, n: int, k: int, seed: int = 0) -> QuantWeight:
    return QuantWeight.from_gguf(torch.from_numpy(random_blocks(qtype, n, k, seed=seed)), qtype, k)


def rounded_product(x: torch.Tensor, weights: list[QuantWeight]) -> torch.Tensor:
    """The float64 product of x and the dequantized weights side by side, both rounded to bfloat16."""
    w = torch.cat([w.dequantize() for w in weights]).bfloat16().double()
    return x.bfloat16().double() @ w.T


def tiles(x: torch.Tensor, weights: list[QuantWeight], out: torch.Tensor | None = None,
          emulate: bool = True) -> torch.Tensor:
    out = x.new_full((x.shape[0], sum(w.out_features for w in weights)), float("nan")) if out is None else out
    ops().gguf_linear_tiles(out, x, [w.raw for w in weights], [w.qtype for w in weights], emulate)
    return out


def assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    scale = want.abs().max().item() or 1.0
    assert (got.double() - want).abs().max().item() <= 2e-6 * scale * max(1.0, want.shape[-1] ** 0.5 / 8)


@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("rows", [1, 31, 32, 45])
def test_tile_form_is_the_product_of_the_rounded_operands(qtype: int, rows: int) -> None:
    w = weight(qtype, 40, 512, seed=rows)  # 40 weight rows: a full group of 32 and a part-filled one
    x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(qtype))
    assert_close(tiles(x, [w]), rounded_product(x, [w]))


def test_fused_parts_over_several_k_blocks_write_their_columns_of_a_wider_output() -> None:
    """K of 2,304 (three K blocks of whole 256-weight blocks), parts of 33, 7 and 64 rows of three
    types into columns 3 .. 107 of a wider output whose other columns stay untouched."""
    k = 2304
    parts = [weight(12, 33, k, seed=1), weight(14, 7, k, seed=2), weight(8, 64, k, seed=3)]
    x = torch.randn(70, k, generator=torch.Generator().manual_seed(4))
    wider = torch.full((70, 110), 7.0)
    tiles(x, parts, out=wider[:, 3:107])
    assert_close(wider[:, 3:107], rounded_product(x, parts))
    assert bool((wider[:, :3] == 7.0).all()) and bool((wider[:, 107:] == 7.0).all())


def test_zero_rows_and_bad_shapes_are_refused_before_anything_runs() -> None:
    w = weight(8, 16, 64)
    assert tiles(torch.randn(0, 64), [w]).shape == (0, 16)
    with pytest.raises(RuntimeError, match="do not hold K"):
        ops().gguf_linear_tiles(torch.empty(3, 16), torch.randn(3, 96), [w.raw], [w.qtype], True)
    with pytest.raises(RuntimeError, match="no decoder"):
        ops().gguf_linear_tiles(torch.empty(3, 16), torch.randn(3, 64), [w.raw], [99], True)


@pytest.mark.skipif(GRANTED, reason="this CPU has AMX tiles granted: the hardware path runs instead")
def test_without_granted_tiles_the_hardware_path_raises_instead_of_faulting() -> None:
    with pytest.raises(RuntimeError, match="no AMX-BF16 tiles granted"):
        tiles(torch.randn(4, 64), [weight(8, 16, 64)], emulate=False)


@needs_tiles
@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
def test_the_tiles_agree_with_their_model(qtype: int) -> None:
    """On the hardware: within the product's rounding of the model (denormals aside, which the
    hardware flushes), and of the rounded operands' exact product."""
    w = weight(qtype, 72, 1024, seed=5)
    x = torch.randn(77, 1024, generator=torch.Generator().manual_seed(6))
    hardware = tiles(x, [w], emulate=False)
    assert_close(hardware, rounded_product(x, [w]))
    assert_close(hardware, tiles(x, [w]).double())


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> dict:
    """The route table, emptied for the test (restored after), and a fresh calibration store."""
    from kernels import quant_routes

    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    known: dict = {}
    monkeypatch.setattr(quant_routes._routes, "known", known)
    return known


def test_quant_matmul_takes_the_tile_form_from_the_calibrated_row_count(routes: dict) -> None:
    """Below the row count the int8 route; from it the tiles (which, without granted tiles, raise: the
    dispatch is what shows)."""
    from kernels import quant_routes
    from kernels.quant import QuantForm, QuantMatmul, quant_form, quant_matmul

    matmul = QuantMatmul.of([weight(12, 24, 256, seed=5), weight(8, 8, 256, seed=6)])
    routes[(matmul.shape, torch.get_num_threads())] = quant_routes.WideRoute(8, True, tiles=True)
    assert quant_form(matmul, 7) is QuantForm.INT8 and quant_form(matmul, 8) is QuantForm.WIDE_TILES
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(1))
    int8 = x.new_empty(7, 32)
    ops().gguf_linear_int8(int8, x[:7], matmul.raws, matmul.qtypes)
    assert torch.equal(quant_matmul(x[:7].contiguous(), matmul), int8)
    if not GRANTED:
        with pytest.raises(RuntimeError, match="no AMX-BF16 tiles granted"):
            quant_matmul(x, matmul)
        return
    by_tiles = x.new_empty(8, 32)
    ops().gguf_linear_tiles(by_tiles, x, matmul.raws, matmul.qtypes, False)
    assert torch.equal(quant_matmul(x, matmul), by_tiles)


def test_the_calibration_takes_the_tile_form_where_it_is_fastest_and_stores_it(
        routes: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tiles among the wide forms (faked here: a tile call that costs nothing), the ladder
    times four routes, the tile form wins the wide route and the stored calibration reads back the
    same; a stored tile route is refused where the CPU has no tiles."""
    from kernels import quant_routes
    from kernels.quant import QuantMatmul

    real_run = quant_routes.run_wide
    monkeypatch.setattr(quant_routes, "REPEATS", 1)
    monkeypatch.setattr(quant_routes, "wide_forms", lambda: ("float32", "bfloat16", "tiles"))
    monkeypatch.setattr(quant_routes, "run_wide",
                        lambda form, *args: None if form == "tiles" else real_run(form, *args))
    matmul = QuantMatmul.of([weight(8, 64, 256, seed=7)])
    cal = quant_routes.calibrate(matmul.shape, matmul.raws, onednn=False)
    assert all(len(ms) == 4 for ms in cal.ms.values()) and cal.wide_tiles and cal.wide_bf16
    assert quant_routes.wide_route(matmul.shape) == cal.route and cal.route.tiles
    monkeypatch.setattr(quant_routes, "measure", lambda *a, **k: pytest.fail("measured again"))
    routes.clear()
    assert quant_routes.calibrate(matmul.shape, matmul.raws, onednn=False) == cal
    monkeypatch.setattr(quant_routes, "wide_forms", lambda: ("float32", "bfloat16"))
    stored = {"wide_from": cal.wide_from, "wide_bf16": True, "wide_tiles": True, "ms": {"1": [1.0, 2.0, 3.0, 4.0]},
              "key": "k", "measured_at": "now"}
    with pytest.raises(ValueError, match="wide_tiles"):
        quant_routes._parse(stored)


@pytest.mark.parametrize("rows", [1, 33, 70])
@pytest.mark.parametrize("n", [40, 64])
def test_pair_panels_in_tiles_give_the_pair_routes_product(rows: int, n: int) -> None:
    """``panel_linear_tiles`` on a bfloat16 weight's pair panels (an odd panel count at 40 columns, K
    over several blocks): x rounded to bfloat16 times the weight, float32 sums, as ``panel_linear``'s
    pair route; the fused gate/up form writes silu(gate) * up."""
    import torch.nn.functional as F

    from kernels.prepack import pack_gate_up, pack_weight

    gen = torch.Generator().manual_seed(rows * n)
    k = 4160  # three K blocks of the panel route
    w = torch.randn(n, k, generator=gen).bfloat16()
    x = torch.randn(rows, k, generator=gen)
    panels = pack_weight(w, pairs=True)
    out = torch.full((rows, n), float("nan"))
    ops().panel_linear_tiles(out, x, panels, False, True)
    want = x.bfloat16().double() @ w.double().T
    assert_close(out, want)
    by_pairs = torch.empty(rows, n)
    ops().panel_linear(by_pairs, x, panels)
    assert_close(out, by_pairs.double())
    gate_up = torch.randn(2 * 32, k, generator=gen).bfloat16()
    act = torch.full((rows, 32), float("nan"))
    ops().panel_linear_tiles(act, x, pack_gate_up(gate_up, 32, pairs=True), True, True)
    product = x.bfloat16().double() @ gate_up.double().T  # float32 sums of ~4,000 terms: an absolute tolerance
    expected = F.silu(product[:, :32]) * product[:, 32:]
    assert (act.double() - expected).abs().max().item() <= 1e-5 * expected.abs().max().item()


def test_pair_panels_in_tiles_refuse_what_they_cannot_multiply() -> None:
    from kernels.prepack import pack_weight

    w = torch.randn(16, 48).bfloat16()  # K = 48: not whole tiles of 32
    with pytest.raises(RuntimeError, match="multiple of 32"):
        ops().panel_linear_tiles(torch.empty(2, 16), torch.randn(2, 48), pack_weight(w, pairs=True), False, True)
    w = torch.randn(16, 64).bfloat16()
    with pytest.raises(RuntimeError, match="do not give"):
        ops().panel_linear_tiles(torch.empty(2, 40), torch.randn(2, 64), pack_weight(w, pairs=True), False, True)
    if not GRANTED:
        with pytest.raises(RuntimeError, match="no AMX-BF16 tiles granted"):
            ops().panel_linear_tiles(torch.empty(2, 16), torch.randn(2, 64), pack_weight(w, pairs=True), False, False)


@needs_tiles
def test_pair_panels_in_tiles_on_the_hardware_agree_with_their_model() -> None:
    from kernels.prepack import pack_weight

    gen = torch.Generator().manual_seed(9)
    w, x = torch.randn(72, 1024, generator=gen).bfloat16(), torch.randn(77, 1024, generator=gen)
    panels = pack_weight(w, pairs=True)
    hardware, model = torch.empty(77, 72), torch.empty(77, 72)
    ops().panel_linear_tiles(hardware, x, panels, False, False)
    ops().panel_linear_tiles(model, x, panels, False, True)
    assert_close(hardware, model.double())
