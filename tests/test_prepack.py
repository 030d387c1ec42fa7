"""Panel-packed weights: the same products as ``F.linear`` at every row count, and the memory switch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels import load_cpu_ops, prepack
from kernels.cpp_build import bf16_products
from kernels.cpu_ops import linear

pytestmark = pytest.mark.core


@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 13, 32, 97, 300])
@pytest.mark.parametrize("k,n", [(96, 200), (40, 16), (8, 33)])
def test_panel_linear_matches_torch(rows: int, k: int, n: int) -> None:
    """Any row count (whole and partial 6-row blocks, several row chunks at 300 x 96) and any N (a
    partial last panel) gives ``F.linear``'s result, with a bias too; without the C++ kernels the
    plain weight serves."""
    gen = torch.Generator().manual_seed(rows * n + k)
    x, w, b = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen), torch.randn(n, generator=gen)
    packed = prepack.pack_weight(w)
    assert packed is not None and packed.shape == ((n + 15) // 16, k, 16)
    cpp = load_cpu_ops()
    torch.testing.assert_close(linear(x, w, None, cpp, packed), F.linear(x, w), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(linear(x, w, b, cpp, packed), F.linear(x, w, b), rtol=1e-4, atol=1e-4)


def test_panel_linear_row_chunks() -> None:
    """A K large enough that the rows go in several L2-sized chunks (200 rows x 1,408)."""
    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    gen = torch.Generator().manual_seed(7)
    x, w = torch.randn(200, 1408, generator=gen), torch.randn(40, 1408, generator=gen)
    torch.testing.assert_close(linear(x, w, None, True, prepack.pack_weight(w)), F.linear(x, w), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 7, 33])
def test_panel_linear_blocks_of_k(rows: int, dtype: torch.dtype) -> None:
    """A K past the kernel's K block (2,500: three blocks, the later ones adding to out) over a
    partial last panel (N = 37), in float32 and bfloat16 panels, with a bias."""
    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    gen = torch.Generator().manual_seed(rows)
    x, w, b = torch.randn(rows, 2500, generator=gen), torch.randn(37, 2500, generator=gen).to(dtype), torch.randn(37)
    got = linear(x, w, b, True, prepack.pack_weight(w))
    pairs = dtype == torch.bfloat16 and bf16_products()  # x rounded to bfloat16 then
    torch.testing.assert_close(got, F.linear(x.bfloat16().float() if pairs else x, w.float(), b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows", [1, 5, 8, 97])
@pytest.mark.parametrize("k,n", [(96, 200), (8, 33)])
def test_bfloat16_panels_multiply_by_the_exact_weights(rows: int, k: int, n: int) -> None:
    """bfloat16 panels under float32 x: the float32 product by the bf16 weights' exact values (float32
    out; only the summation order differs), with a partial last panel and a bias; the interleaved
    layout holds column c of a panel row at slot 2c (c < 8) or 2(c - 8) + 1."""
    gen = torch.Generator().manual_seed(rows + n)
    x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen).bfloat16()
    b = torch.randn(n, generator=gen)
    packed = prepack.pack_weight(w, pairs=False)
    assert packed is not None and packed.dtype == torch.bfloat16 and packed.shape == ((n + 15) // 16, k, 16)
    assert torch.equal(packed[0, 3, 0::2], w[:8, 3]) and torch.equal(packed[0, 3, 1::2], w[8:16, 3])
    expected = F.linear(x, w.float(), b)
    got = linear(x, w, b, load_cpu_ops(), packed)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(linear(x, w, b), expected)  # no kernels, no panels: widened by torch


needs_pairs = pytest.mark.skipif(not load_cpu_ops() or not bf16_products(),
                                 reason="no C++ kernels with bfloat16 products (needs AVX512_BF16)")


@needs_pairs
@pytest.mark.parametrize("rows", [1, 5, 13, 97, 300])
@pytest.mark.parametrize("k,n", [(96, 200), (63, 33), (1100, 40)])
def test_bfloat16_pair_panels_multiply_the_rounded_x(rows: int, k: int, n: int) -> None:
    """Pair panels (the default for bfloat16 weights where the build has bfloat16 products): lane 2c + j
    of pair row kp holds column c's weight at k 2kp + j (a zero past an odd K); the product is x rounded
    to bfloat16 times the weights, float32 sums (only the summation order differs), with a partial
    last panel, K in blocks (1,100) and a bias."""
    gen = torch.Generator().manual_seed(rows + n + k)
    x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen).bfloat16()
    b = torch.randn(n, generator=gen)
    packed = prepack.pack_weight(w)
    assert packed is not None and packed.dtype == torch.bfloat16 and packed.shape == ((n + 15) // 16, (k + 1) // 2, 32)
    assert torch.equal(packed[0, 3, 0::2], w[:16, 6]) and torch.equal(packed[0, 3, 1::2], w[:16, 7])
    if k % 2:
        assert torch.equal(packed[:, -1, 1::2], torch.zeros_like(packed[:, -1, 1::2]))
    got = linear(x, w, b, True, packed)
    expected = F.linear(x.bfloat16().double(), w.double(), b.double())
    atol = 1e-5 * max(1.0, k / 96) ** 0.5
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=atol)
    unrounded = F.linear(x.double(), w.double(), b.double())
    assert (got.double() - unrounded).abs().max() > 20 * atol  # x really is rounded


@needs_pairs
def test_bfloat16_pair_panels_over_an_empty_k_give_zeros() -> None:
    from kernels.cpp_build import ops

    packed = prepack.pack_weight(torch.empty(20, 0, dtype=torch.bfloat16))
    assert packed is not None and packed.shape == (2, 0, 32)
    out = torch.full((3, 20), 5.0)
    ops().panel_linear(out, torch.empty(3, 0), packed)
    assert torch.equal(out, torch.zeros(3, 20))


def test_pair_panels_are_refused_where_the_build_has_no_bfloat16_products() -> None:
    if not load_cpu_ops() or bf16_products():
        pytest.skip("needs the C++ kernels of a build without bfloat16 products")
    from kernels.cpp_build import ops

    w = torch.randn(16, 8).bfloat16()
    with pytest.raises(RuntimeError, match="AVX512_BF16"):
        ops().panel_linear(torch.empty(2, 16), torch.randn(2, 8), prepack.pack_weight(w, pairs=True))


def test_pack_weight_refuses_what_it_cannot_pack() -> None:
    assert prepack.pack_weight(torch.randn(4, 8, dtype=torch.float16)) is None
    assert prepack.pack_weight(torch.randn(8)) is None


def test_prepack_switch_and_memory_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """``=1`` always packs, ``=0`` never; unset, only copies within a quarter of available memory."""
    monkeypatch.setenv(prepack.ENV_SWITCH, "1")
    assert prepack.prepack_allowed(1 << 60)
    monkeypatch.setenv(prepack.ENV_SWITCH, "0")
    assert not prepack.prepack_allowed(1)
    monkeypatch.delenv(prepack.ENV_SWITCH)
    monkeypatch.setattr(prepack, "_available_memory_bytes", lambda: 4000)
    assert prepack.prepack_allowed(1000) and not prepack.prepack_allowed(1001)
    monkeypatch.setattr(prepack, "_available_memory_bytes", lambda: None)
    assert not prepack.prepack_allowed(1)


def test_panel_linear_empty_shapes() -> None:
    """No rows, or an empty inner dimension, are products too (nothing to compute, zeros)."""
    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    w = torch.randn(40, 24)
    assert linear(torch.randn(0, 24), w, None, True, prepack.pack_weight(w)).shape == (0, 40)
    empty_w = torch.randn(40, 0)
    out = linear(torch.randn(3, 0), empty_w, None, True, prepack.pack_weight(empty_w))
    assert torch.equal(out, torch.zeros(3, 40))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gate_up_silu_over_an_empty_k_is_zero(dtype: torch.dtype) -> None:
    """K = 0: silu(0) * 0 for every output, in float32 and bfloat16 (pair) panels."""
    if not load_cpu_ops():
        pytest.skip("C++ kernels unavailable")
    from kernels.cpp_build import ops

    packed = prepack.pack_gate_up(torch.empty(64, 0, dtype=dtype), 32)
    out = torch.full((3, 32), 5.0)
    ops().panel_linear_silu(out, torch.empty(3, 0), packed)
    assert torch.equal(out, torch.zeros(3, 32))
