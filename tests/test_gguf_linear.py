"""GGUF quantized weights in the C++ kernels, straight on the file's blocks: ``gguf_dequantize`` gives
gguf-py's float32 weights bit for bit for every served type (a zero's sign aside); ``quant_matmul``
is exactly the product of the dequantized weights with the int8-rounded activations (llama.cpp's
Q8_0 / Q8_K rounding, up to float32 summation order) at every row count, and within 3% of the
largest output of the float32 product; fused parts write their own columns; ``rows`` reorders;
malformed weights are a ``ValueError``. Each compiled route (AVX-512, AVX2, scalar) is checked
against the same reference on the machine that runs it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.quant_bench import random_blocks
from kernels.cpp_build import load_cpu_ops
from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight, quant_matmul

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]
gguf_quants = pytest.importorskip("gguf.quants")
TYPES = sorted(GGML_BLOCKS)
TYPE_IDS = [GGML_BLOCKS[t][0] for t in TYPES]


def reference(raw: np.ndarray, qtype: int, k: int) -> torch.Tensor:
    from gguf import GGMLQuantizationType

    return torch.from_numpy(gguf_quants.dequantize(raw, GGMLQuantizationType(qtype)).reshape(-1, k).astype(np.float32))


def int8_activations(x: torch.Tensor, block: int) -> torch.Tensor:
    """``x`` as the kernels round it: per block, codes round(x * 127 / amax) (float32 arithmetic,
    half to even) times amax / 127, returned in float64."""
    xb = x.reshape(x.shape[0], -1, block)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, torch.tensor(127.0) / amax, torch.zeros_like(amax))
    codes = torch.round(xb * inv).clamp(-127, 127)
    d = torch.where(amax > 0, amax / 127.0, torch.zeros_like(amax))
    return (codes.double() * d.double()).reshape(x.shape)


@pytest.mark.parametrize("qtype", TYPES, ids=TYPE_IDS)
def test_dequantize_is_gguf_py_bit_for_bit(qtype: int) -> None:
    k = 512
    raw = random_blocks(qtype, 37, k)
    got, expected = QuantWeight.from_gguf(torch.from_numpy(raw), qtype, k).dequantize(), reference(raw, qtype, k)
    assert torch.equal(got, expected)  # as numbers; bit for bit but for zeros (+0 where gguf-py may have -0)
    nonzero = expected != 0
    assert torch.equal(got[nonzero].view(torch.int32), expected[nonzero].view(torch.int32))


# (GGML type, K): the K-quants once; the 32-weight types with an odd count of blocks (the 256-bit route)
# and with pairs of them (the 512-bit route where the build has it: K a multiple of 64).
SHAPES = [(t, 768) if GGML_BLOCKS[t][1] == 256 else (t, k) for t in TYPES for k in (96, 128)
          if GGML_BLOCKS[t][1] != 256 or k == 96]
SHAPE_IDS = [f"{GGML_BLOCKS[t][0]}-K{k}" for t, k in SHAPES]


@pytest.mark.parametrize(("qtype", "k"), SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 9, 17, 26, 29])  # 26, 29: wide steps, odd tails
def test_quant_matmul_is_the_product_with_int8_activations(qtype: int, k: int, rows: int) -> None:
    block = 256 if GGML_BLOCKS[qtype][1] == 256 else 32
    raw = random_blocks(qtype, 45, k, seed=rows)
    weight = QuantWeight.from_gguf(torch.from_numpy(raw), qtype, k)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
    w = reference(raw, qtype, k).double()
    got = quant_matmul(x, QuantMatmul.of([weight])).double()
    assert got.shape == (rows, 45)
    exact = int8_activations(x, block) @ w.T
    torch.testing.assert_close(got, exact, rtol=1e-5, atol=1e-5 * float(exact.abs().max()))
    full = x.double() @ w.T
    assert float((got - full).abs().max()) <= 0.03 * float(full.abs().max())


def test_zero_activations_give_zero_outputs() -> None:
    for qtype in TYPES:
        k = 256
        weight = QuantWeight.from_gguf(torch.from_numpy(random_blocks(qtype, 8, k)), qtype, k)
        assert torch.equal(weight.linear(torch.zeros(2, k)), torch.zeros(2, 8))


def test_fused_parts_of_mixed_types_write_their_columns_and_take_a_bias() -> None:
    k = 256
    q, kk, v = (QuantWeight.from_gguf(torch.from_numpy(random_blocks(t, n, k, seed=n)), t, k)
                for t, n in ((12, 32), (2, 16), (14, 16)))
    fused = QuantMatmul.of([q, kk, v])
    assert fused.out_features == 64 and fused.nbytes == q.nbytes + kk.nbytes + v.nbytes
    bias = torch.randn(64)
    for rows in (1, 4, 9):
        x = torch.randn(rows, k)
        parts = torch.cat([p.linear(x) for p in (q, kk, v)], dim=1)
        out = torch.full((rows, 64), float("nan"))
        assert quant_matmul(x, fused, bias, out=out) is out
        torch.testing.assert_close(out, parts + bias)


def test_a_fused_product_of_both_centred_types_and_a_min_type_is_exact() -> None:
    """Q4_0 and Q5_0 parts share one set of activation blocks whose integer sums start at their own
    centres (-8 and -16 times the q sums), beside a Q4_1 part (a float min) and Q8_0: on both routes
    each part's columns are the int8-activation product with its dequantized weights."""
    for k in (96, 128):
        parts = [QuantWeight.from_gguf(torch.from_numpy(random_blocks(t, 24, k, seed=t)), t, k) for t in (2, 6, 3, 8)]
        weights = torch.cat([reference(p.raw.numpy(), p.qtype, k) for p in parts]).double()
        for rows in (1, 6, 9):
            x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows + k))
            got = quant_matmul(x, QuantMatmul.of(parts)).double()
            exact = int8_activations(x, 32) @ weights.T
            torch.testing.assert_close(got, exact, rtol=1e-5, atol=1e-5 * float(exact.abs().max()))


def test_a_part_writes_only_its_slice_of_a_wider_output() -> None:
    k = 512
    weight = QuantWeight.from_gguf(torch.from_numpy(random_blocks(12, 40, k)), 12, k)
    x = torch.randn(5, k)
    wide = torch.zeros(5, 100)
    weight.linear(x, wide[:, 30:70])
    torch.testing.assert_close(wide[:, 30:70], weight.linear(x))
    assert not wide[:, :30].any() and not wide[:, 70:].any()


def test_from_gguf_keeps_the_given_bytes_without_a_copy() -> None:
    raw = torch.from_numpy(random_blocks(12, 4, 256))
    assert QuantWeight.from_gguf(raw, 12, 256).raw.data_ptr() == raw.data_ptr()


def test_rows_and_embedding_dequantize_the_rows_they_name() -> None:
    k = 64
    weight = QuantWeight.from_gguf(torch.from_numpy(random_blocks(3, 10, k)), 3, k)
    index = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
    assert torch.equal(weight.rows(index).dequantize(), weight.dequantize()[index])
    ids = torch.tensor([[2, 2, 7]])
    assert torch.equal(QuantMatmul.of([weight]).embedding(ids), weight.dequantize()[[2, 2, 7]])


def test_malformed_quantized_weights_are_value_errors() -> None:
    good = torch.from_numpy(random_blocks(8, 4, 64))
    with pytest.raises(ValueError, match="not served natively"):
        QuantWeight.from_gguf(good, 10, 64)  # Q2_K has no kernel
    with pytest.raises(ValueError, match="do not hold"):
        QuantWeight.from_gguf(good, 8, 96)
    with pytest.raises(ValueError, match="do not hold"):
        QuantWeight.from_gguf(good, 8, 60)  # not a whole number of blocks
    with pytest.raises(ValueError, match="uint8"):
        QuantWeight.from_gguf(good.to(torch.int16), 8, 64)
    with pytest.raises(ValueError, match="one input width"):
        QuantMatmul.of([])
    with pytest.raises(ValueError, match="one quantized weight"):
        QuantMatmul.of([QuantWeight.from_gguf(good, 8, 64)] * 2).embedding(torch.tensor([0]))


def test_bench_quant_times_both_paths_on_a_qwen_layer() -> None:
    from benchmarks.quant_bench import HEADERS, bench_quant, table_rows

    results = bench_quant([1, 9], layers=1, repeats=1)
    assert [r["rows"] for r in results] == [1, 9]
    assert all(r["quant_ms"] > 0 and r["float32_ms"] > 0 and r["quant_gmacs"] > 0 for r in results)
    rows = table_rows([{"threads": 2, **r} for r in results])
    assert len(rows[0]) == len(HEADERS)
