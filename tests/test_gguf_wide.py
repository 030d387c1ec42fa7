"""The wide-step route on GGUF blocks (``gguf_linear_wide``: weights dequantized a slice at a time into
the panel micro-kernel) and the measured choice between it and the int8 route (``kernels.quant_routes``).

The wide route is ``x @ dequantize()^T`` up to float32 summation order (its bfloat16 form, where the
build has it: the product of both operands rounded to bfloat16) for every served type, at row
counts that are and are not multiples of the panel width, over K in one and in several blocks, over
row counts that take several chunks; fused parts of mixed types write their own columns of a wider
output. ``quant_matmul`` takes the wide route exactly from the calibrated row count, in the calibrated
form; an unprepared shape never measures and stays on the int8 route."""

from __future__ import annotations

import pytest
import torch

from benchmarks.quant_bench import random_blocks
from kernels import onednn_wide, quant_routes
from kernels.calibration_store import NEVER
from kernels.cpp_build import bf16_products, load_cpu_ops, ops
from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight, quant_matmul

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]
TYPES = sorted(GGML_BLOCKS)
TYPE_IDS = [GGML_BLOCKS[t][0] for t in TYPES]


def weight(qtype: int, n: int, k: int, seed: int = 0) -> QuantWeight:
    return QuantWeight.from_gguf(torch.from_numpy(random_blocks(qtype, n, k, seed=seed)), qtype, k)


def exact(x: torch.Tensor, weights: list[QuantWeight], bf16: bool = False) -> torch.Tensor:
    """The float64 product with the dequantized weights, side by side (``bf16``: of both operands
    rounded to bfloat16)."""
    w = torch.cat([w.dequantize() for w in weights])
    if bf16:
        x, w = x.bfloat16(), w.bfloat16()
    return x.double() @ w.double().T


def wide(x: torch.Tensor, weights: list[QuantWeight], out: torch.Tensor | None = None,
         bf16: bool = False) -> torch.Tensor:
    out = x.new_empty(x.shape[0], sum(w.out_features for w in weights)) if out is None else out
    ops().gguf_linear_wide(out, x, [w.raw for w in weights], [w.qtype for w in weights], bf16)
    return out


BF16 = bf16_products()
needs_bf16 = pytest.mark.skipif(not BF16, reason="the kernels in use have no bfloat16 products (needs AVX512_BF16)")


def assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    scale = want.abs().max().item() or 1.0
    assert (got.double() - want).abs().max().item() <= 2e-6 * scale * max(1.0, want.shape[-1] ** 0.5 / 8)


@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("rows", [1, 5, 16, 17, 33, 130])
def test_wide_route_is_the_product_with_the_dequantized_weights(qtype: int, rows: int) -> None:
    k = 768 if GGML_BLOCKS[qtype][1] == 256 else 608  # K in two blocks, one of them partial
    w = weight(qtype, 29, k, seed=rows)  # 29 rows: groups of 12 (or 6) and a short last one
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
    assert_close(wide(x, [w]), exact(x, [w]))


@needs_bf16
@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
@pytest.mark.parametrize("rows", [1, 17, 33, 130])
def test_bf16_form_is_the_product_of_the_rounded_operands(qtype: int, rows: int) -> None:
    k = 768 if GGML_BLOCKS[qtype][1] == 256 else 608
    w = weight(qtype, 29, k, seed=rows)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
    got = wide(x, [w], bf16=True)
    assert_close(got, exact(x, [w], bf16=True))
    want = exact(x, [w])  # the rounding is real: far from the unrounded product at this tolerance
    assert (got.double() - want).abs().max().item() > 20 * 2e-6 * want.abs().max().item()


@needs_bf16
def test_bf16_form_over_several_chunks_and_mixed_parts() -> None:
    parts = [weight(12, 20, 1024, seed=1), weight(14, 7, 1024, seed=2), weight(3, 13, 1024, seed=3)]
    x = torch.randn(900, 1024, generator=torch.Generator().manual_seed(4))
    wider = torch.full((900, 50), 7.0)
    wide(x, parts, out=wider[:, 5:45], bf16=True)
    assert_close(wider[:, 5:45], exact(x, parts, bf16=True))
    assert torch.equal(wider[:, :5], torch.full((900, 5), 7.0)) and torch.equal(wider[:, 45:], torch.full((900, 5), 7.0))


@pytest.mark.skipif(BF16, reason="this build has bfloat16 products")
def test_bf16_form_is_refused_by_a_build_without_it() -> None:
    w = weight(2, 8, 64)
    with pytest.raises(RuntimeError, match="AVX512_BF16"):
        wide(torch.randn(3, 64), [w], bf16=True)


def test_many_rows_go_in_several_chunks() -> None:
    w = weight(3, 40, 1024, seed=1)  # Q4_1, K in two blocks: chunks of fewer rows than x has
    x = torch.randn(900, 1024, generator=torch.Generator().manual_seed(2))
    assert_close(wide(x, [w]), exact(x, [w]))


def test_fused_parts_of_mixed_types_write_their_columns_of_a_wider_output() -> None:
    parts = [weight(12, 20, 512, seed=1), weight(14, 7, 512, seed=2), weight(8, 13, 512, seed=3)]
    x = torch.randn(40, 512, generator=torch.Generator().manual_seed(4))
    wider = torch.full((40, 50), 7.0)
    wide(x, parts, out=wider[:, 5:45])
    assert_close(wider[:, 5:45], exact(x, parts))
    assert torch.equal(wider[:, :5], torch.full((40, 5), 7.0)) and torch.equal(wider[:, 45:], torch.full((40, 5), 7.0))


def test_zero_rows_and_bad_shapes() -> None:
    w = weight(2, 8, 64)
    assert wide(torch.empty(0, 64), [w]).shape == (0, 8)
    with pytest.raises(RuntimeError, match="do not hold K"):
        ops().gguf_linear_wide(torch.empty(3, 8), torch.randn(3, 96), [w.raw], [w.qtype])
    with pytest.raises(RuntimeError, match="no decoder"):
        ops().gguf_linear_wide(torch.empty(3, 8), torch.randn(3, 64), [w.raw], [99])


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The route table, emptied for the test (restored after)."""
    known: dict = {}
    monkeypatch.setattr(quant_routes._routes, "known", known)
    return known


@pytest.mark.parametrize("bf16", [False, pytest.param(True, marks=needs_bf16)], ids=["float32", "bf16"])
def test_quant_matmul_takes_the_wide_route_from_the_calibrated_row_count(routes: dict, bf16: bool) -> None:
    matmul = QuantMatmul.of([weight(3, 24, 256, seed=5), weight(8, 8, 256, seed=6)])
    routes[(matmul.shape, torch.get_num_threads())] = quant_routes.WideRoute(8, bf16)
    for rows in (7, 8):
        x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows))
        int8, by_wide = x.new_empty(rows, 32), x.new_empty(rows, 32)
        ops().gguf_linear_int8(int8, x, matmul.raws, matmul.qtypes)
        ops().gguf_linear_wide(by_wide, x, matmul.raws, matmul.qtypes, bf16)
        assert not torch.equal(int8, by_wide)  # the two routes round differently: the choice is visible
        assert torch.equal(quant_matmul(x, matmul), by_wide if rows >= 8 else int8)


def test_an_unprepared_shape_stays_on_the_int8_route_without_measuring(routes: dict,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quant_routes, "measure", lambda *a: pytest.fail("measured on a step's path"))
    matmul = QuantMatmul.of([weight(2, 16, 64)])
    assert quant_routes.wide_route(matmul.shape) == quant_routes.INT8_ONLY
    x = torch.randn(300, 64, generator=torch.Generator().manual_seed(0))
    int8 = x.new_empty(300, 16)
    ops().gguf_linear_int8(int8, x, matmul.raws, matmul.qtypes)
    assert torch.equal(quant_matmul(x, matmul), int8)


def test_calibration_times_both_routes_and_is_cached(routes: dict, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(quant_routes, "REPEATS", 1)
    matmul = QuantMatmul.of([weight(6, 64, 256, seed=7)])
    cal = quant_routes.calibrate(matmul.shape, matmul.raws)
    assert list(cal.ms) == [str(r) for r in quant_routes.ladder(matmul.shape)]
    assert all(len(ms) == 2 + BF16 and min(ms) > 0 for ms in cal.ms.values())  # int8, float32 wide[, bf16 wide]
    assert cal.wide_from == NEVER or str(cal.wide_from) in cal.ms
    assert BF16 or not cal.wide_bf16
    assert quant_routes.wide_route(matmul.shape) == cal.route == quant_routes.WideRoute(
        cal.wide_from, cal.wide_bf16, cal.onednn_from)
    if onednn_wide.available():  # the oneDNN form timed at a prefill width against the route it would take
        assert cal.onednn_ms is not None and list(cal.onednn_ms) == [str(quant_routes.ONEDNN_ROWS)]
        assert cal.onednn_from in (NEVER, quant_routes.ONEDNN_ROWS)
    else:
        assert cal.onednn_from == NEVER and cal.onednn_ms is None
    monkeypatch.setattr(quant_routes, "measure", lambda *a: pytest.fail("measured again"))
    again = quant_routes.calibrate(matmul.shape, matmul.raws)  # read back from the store
    assert again == cal


def test_the_ladder_keeps_the_decode_widths_and_stops_at_the_flop_budget_past_them() -> None:
    huge = quant_routes.QuantShape(4096, ((12, 200_000),))  # an LM head: 1.6 GFLOP a row
    assert quant_routes.ladder(huge) == tuple(r for r in quant_routes.ROWS if r <= quant_routes.DECODE_ROWS)
    layer = quant_routes.QuantShape(1536, ((12, 8960), (12, 8960)))  # 55 MFLOP a row: up to 64 rows by budget
    assert quant_routes.ladder(layer)[-1] == 64
    small = quant_routes.QuantShape(64, ((2, 16),))
    assert quant_routes.ladder(small) == quant_routes.ROWS


def test_bench_calibrate_measures_a_gguf_models_own_matmuls(routes: dict, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path) -> None:
    """``bench kernels --calibrate --gguf-models FILE``: every distinct fused matmul of the file and its LM
    head, timed on the file's blocks under the keys the model's loading reads."""
    from gguf_helpers import write_tiny_llama_gguf

    from benchmarks.kernels_bench import _calibrate_quant

    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(quant_routes, "REPEATS", 1)
    parts = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output", "token_embd")
    path = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(path, quant={p: 8 for p in parts})  # Q8_0
    rows = _calibrate_quant(str(torch.get_num_threads()), [str(path)])
    decisions = [r for r in rows if r[3] == "wide from"]
    assert {r[2] for r in decisions} == {"64+32+32x64", "64x64", "128+128x64", "64x128", f"{routes_head(path)}x64"}
    assert len(routes) == len(decisions)  # each shape's route is known for this thread count


def routes_head(path) -> int:
    """The LM head's rows (the vocabulary) of a tiny GGUF file."""
    from agent_engine.model.gguf_tensors import read_tensor_table

    return read_tensor_table(path).tensors["output.weight"].rows


needs_onednn_bf16 = pytest.mark.skipif(not onednn_wide.available(),
                                       reason="oneDNN has no native bfloat16 on this CPU (needs AVX512_BF16 or AMX)")


@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
def test_dequantize_into_bfloat16_rounds_the_float32_weights(qtype: int) -> None:
    w = weight(qtype, 29, 768 if GGML_BLOCKS[qtype][1] == 256 else 608, seed=3)
    into = torch.empty(w.out_features, w.in_features, dtype=torch.bfloat16)
    ops().gguf_dequantize(into, w.raw, w.qtype)
    assert torch.equal(into, w.dequantize().bfloat16())


def by_onednn(x: torch.Tensor, weights: list[QuantWeight], out: torch.Tensor | None = None) -> torch.Tensor:
    out = x.new_empty(x.shape[0], sum(w.out_features for w in weights)) if out is None else out
    onednn_wide.onednn_wide(out, x, [w.raw for w in weights], [w.qtype for w in weights])
    return out


def assert_bf16_product(got: torch.Tensor, x: torch.Tensor, weights: list[QuantWeight]) -> None:
    """``got`` is the product of the rounded operands, itself rounded to bfloat16 (within its last bit)."""
    want = exact(x, weights, bf16=True)
    assert (got.double() - want).abs().max().item() <= 2**-8 * want.abs().max().item()
    unrounded = exact(x, weights)  # the rounding is real at a float32 route's tolerance
    assert (got.double() - unrounded).abs().max().item() > 20 * 2e-6 * unrounded.abs().max().item()


@needs_onednn_bf16
def test_onednn_form_over_chunks_and_mixed_parts_writes_its_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several chunks per part (a chunk of 8 rows here), the scratch reused between parts of other
    types, each part's columns of a wider output."""
    monkeypatch.setattr(onednn_wide, "CHUNK_BYTES", 8 * 2 * 1024)
    parts = [weight(12, 20, 1024, seed=1), weight(14, 7, 1024, seed=2), weight(3, 13, 1024, seed=3)]
    x = torch.randn(300, 1024, generator=torch.Generator().manual_seed(4))
    wider = torch.full((300, 50), 7.0)
    by_onednn(x, parts, out=wider[:, 5:45])
    assert_bf16_product(wider[:, 5:45], x, parts)
    assert torch.equal(wider[:, :5], torch.full((300, 5), 7.0)) and torch.equal(wider[:, 45:], torch.full((300, 5), 7.0))
    again = by_onednn(x, parts[1:])  # the same scratch, other weights: nothing of the last call stays
    assert_bf16_product(again, x, parts[1:])


@needs_onednn_bf16
def test_quant_matmul_takes_the_onednn_form_from_its_row_count(routes: dict) -> None:
    matmul = QuantMatmul.of([weight(12, 24, 256, seed=5), weight(14, 8, 256, seed=6)])
    routes[(matmul.shape, torch.get_num_threads())] = quant_routes.WideRoute(8, False, 16)
    for rows, form in ((8, "wide"), (16, "onednn")):
        x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows))
        want = wide(x, matmul.parts) if form == "wide" else by_onednn(x, list(matmul.parts))
        assert torch.equal(quant_matmul(x, matmul), want)


def test_a_stored_onednn_route_is_trusted_only_with_its_timing() -> None:
    base = {"wide_from": 64, "wide_bf16": False, "ms": {"64": [2.0, 1.0]}, "key": "k", "measured_at": "now"}
    row = str(quant_routes.ONEDNN_ROWS)
    good = quant_routes._parse({**base, "onednn_from": quant_routes.ONEDNN_ROWS, "onednn_ms": {row: [3.0, 1.0]}})
    assert good.route == quant_routes.WideRoute(64, False, quant_routes.ONEDNN_ROWS)
    assert quant_routes._parse(base).onednn_from == NEVER  # stored before the form: never oneDNN
    for bad in ({"onednn_from": 16}, {"onednn_from": 16, "onednn_ms": {"16": [3.0, 1.0]}},
                {"onednn_from": quant_routes.ONEDNN_ROWS, "onednn_ms": {row: [-3.0, 1.0]}}):
        with pytest.raises(ValueError):
            quant_routes._parse({**base, **bad})
