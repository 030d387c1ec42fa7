"""GGUF quantized weights in the C++ kernels: ``quant_dequantize`` gives gguf-py's float32 weights bit
for bit for every served type (a zero's sign aside), ``quant_linear`` equals the float32 product up to summation order at
every row count (one row, a group of eight, groups and a ragged tail), fused parts of mixed types
concatenate, and malformed weights are a ``ValueError``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.quant_bench import random_blocks
from kernels.cpp_build import load_cpu_ops
from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight, quant_matmul

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]
gguf_quants = pytest.importorskip("gguf.quants")


def reference(raw: np.ndarray, qtype: int, k: int) -> torch.Tensor:
    from gguf import GGMLQuantizationType

    return torch.from_numpy(gguf_quants.dequantize(raw, GGMLQuantizationType(qtype)).reshape(-1, k).astype(np.float32))


@pytest.mark.parametrize("qtype", sorted(GGML_BLOCKS), ids=[GGML_BLOCKS[t][0] for t in sorted(GGML_BLOCKS)])
def test_dequantize_is_gguf_py_bit_for_bit(qtype: int) -> None:
    k = 512
    raw = random_blocks(qtype, 37, k)
    got, expected = QuantWeight.from_gguf(torch.from_numpy(raw), qtype, k).dequantize(), reference(raw, qtype, k)
    assert torch.equal(got, expected)  # as numbers; bit for bit but for zeros (+0 where gguf-py may have -0)
    nonzero = expected != 0
    assert torch.equal(got[nonzero].view(torch.int32), expected[nonzero].view(torch.int32))


@pytest.mark.parametrize("qtype", sorted(GGML_BLOCKS), ids=[GGML_BLOCKS[t][0] for t in sorted(GGML_BLOCKS)])
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 17])
def test_quant_linear_is_the_float32_product(qtype: int, rows: int) -> None:
    k = 768 if GGML_BLOCKS[qtype][1] == 256 else 96
    raw = random_blocks(qtype, 45, k, seed=rows)
    weight = QuantWeight.from_gguf(torch.from_numpy(raw), qtype, k)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
    expected = (x.double() @ reference(raw, qtype, k).double().T)
    got = weight.linear(x)
    assert got.shape == (rows, 45)
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * float(expected.abs().max()))


def test_fused_parts_of_mixed_types_concatenate_and_take_a_bias() -> None:
    k = 256
    q, kk, v = (QuantWeight.from_gguf(torch.from_numpy(random_blocks(t, n, k, seed=n)), t, k)
                for t, n in ((2, 32), (2, 16), (8, 16)))
    fused = QuantMatmul.of([q, kk, v])
    assert [p.type_name for p in fused.parts] == ["Q4_0", "Q8_0"]  # Q and K merged: one call per type
    weight = torch.cat([q.dequantize(), kk.dequantize(), v.dequantize()])
    bias = torch.randn(64)
    for rows in (1, 8, 9):  # one group of rows, a full group, a second group
        x = torch.randn(rows, k)
        torch.testing.assert_close(quant_matmul(x, fused, bias), F.linear(x, weight, bias), rtol=1e-5, atol=1e-4)


def test_rows_reorders_output_features() -> None:
    k = 64
    weight = QuantWeight.from_gguf(torch.from_numpy(random_blocks(3, 10, k)), 3, k)
    index = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
    assert torch.equal(weight.rows(index).dequantize(), weight.dequantize()[index])


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


def test_bench_quant_times_both_paths_on_a_qwen_layer() -> None:
    from benchmarks.quant_bench import HEADERS, bench_quant, table_rows

    results = bench_quant([1, 9], layers=1, repeats=1)
    assert [r["rows"] for r in results] == [1, 9]
    assert all(r["quant_ms"] > 0 and r["float32_ms"] > 0 and r["quant_gmacs"] > 0 for r in results)
    rows = table_rows([{"threads": 2, **r} for r in results])
    assert len(rows[0]) == len(HEADERS)
