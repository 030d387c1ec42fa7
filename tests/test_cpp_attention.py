"""The C++ CPU kernels (kernels/csrc/cpu_ops.cpp) == their torch fallbacks == the float64 reference.

The library is built at first use (about 40 s on 2 cores, once per machine; cached afterwards). If it
cannot build here, the kernel tests skip and the fallback test still checks the warning path.
"""

from __future__ import annotations

import importlib
import random

import pytest
import torch
import torch.nn.functional as F

from kernels import (
    AttentionMetadata,
    build_attention_metadata,
    cpp_build,
    load_cpu_ops,
    paged_attention_cpp,
    paged_attention_reference,
    paged_attention_torch,
    write_kv_cache,
)
from kernels.cpu_ops import linear, rms_norm, rotary_and_cache, silu_and_mul

pytestmark = pytest.mark.core

needs_cpp = pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")


def _case(reqs: list[tuple[int, int]], block_size: int, hq: int, hk: int, d: int, dtype: torch.dtype,
          seed: int) -> dict:
    """Random paged caches; request i has ``reqs[i] = (context_len, query_len)``; blocks shuffled."""
    gen = torch.Generator().manual_seed(seed)
    need = sum(-(-(c + q) // block_size) for c, q in reqs)
    free = list(range(1, need + 3))
    random.Random(seed).shuffle(free)
    k_cache = torch.randn(need + 3, block_size, hk, d, generator=gen).to(dtype)
    v_cache = torch.randn(need + 3, block_size, hk, d, generator=gen).to(dtype)
    tables = [[free.pop() for _ in range(-(-(c + q) // block_size))] for c, q in reqs]
    meta = build_attention_metadata([q for _, q in reqs], [c for c, _ in reqs], tables, block_size)
    tokens = meta.num_tokens
    # A fused-QKV-like buffer: the query is a row-strided view, as the lean decoder passes it.
    qkv = torch.randn(tokens, hq + 2 * hk, d, generator=gen).to(dtype)
    query, key, value = qkv[:, :hq], qkv[:, hq : hq + hk], qkv[:, hq + hk :]
    write_kv_cache(key, value, k_cache, v_cache, meta.slot_mapping)
    return dict(query=query, key=key, value=value, k_cache=k_cache, v_cache=v_cache, meta=meta)


CASES = [
    [(0, 1)],  # one token, no context
    [(37, 1), (0, 1), (5, 1), (130, 1)],  # decodes only
    [(0, 9), (13, 1), (20, 7), (3, 1)],  # short fresh prompt, decodes, a chunk over context
    [(0, 80), (33, 70), (64, 1)],  # a long fresh prompt (SDPA) next to a long chunk over context
    [(300, 1), (7, 1), (250, 1)],  # decodes over more than eight keys a block: the prefetching loops
    [(200, 16), (90, 15), (5, 1)],  # at the SDPA threshold over long context, one below it, a decode
    [(0, 150), (400, 33), (1, 2)],  # many 16-row tiles; a tile of 2 rows over 3 keys (padded panel)
]
ATTENTION = importlib.import_module("kernels.paged_attention")


@pytest.fixture(params=[(64, 16), (4096, 2048), (1, 1)], ids=["avx512-routes", "avx2-routes", "all-sdpa"])
def sdpa_routes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Every route between SDPA and the C++ kernel, whatever this machine's ISA picked."""
    fresh, context = request.param
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_FRESH_QUERY", fresh)
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_CONTEXT_QUERY", context)
    return request.param


@needs_cpp
@pytest.mark.parametrize("reqs", CASES)
@pytest.mark.parametrize("block_size,hq,hk,d", [(16, 8, 2, 64), (4, 4, 4, 16), (32, 9, 3, 64), (1, 2, 1, 8),
                                               (8, 4, 2, 128), (16, 14, 2, 64), (16, 2, 2, 64)])
# d 64 and 128: the float32 AVX2 path, GQA groups of 1, 2, 3, 4 and 7 query heads
def test_cpp_attention_matches_reference(reqs: list[tuple[int, int]], block_size: int, hq: int, hk: int,
                                         d: int, sdpa_routes: tuple[int, int]) -> None:
    case = _case(reqs, block_size, hq, hk, d, torch.float32, seed=block_size + hq)
    args = (case["k_cache"], case["v_cache"], case["meta"], 0.125)
    ref = paged_attention_reference(case["query"].contiguous(), *args)
    out = paged_attention_cpp(case["query"], case["key"], case["value"], *args)
    torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
    fallback = paged_attention_torch(case["query"], case["key"], case["value"], *args)
    torch.testing.assert_close(out, fallback, rtol=2e-5, atol=2e-5)


def _shared_prefix_case(families: list[tuple[int, list[int]]], extra: list[tuple[int, int]], block_size: int,
                        hq: int, hk: int, d: int, seed: int) -> dict:
    """Decode rows in families that share leading blocks: ``families[f] = (shared blocks, [own keys of each
    row after them])``, then ``extra`` requests ``(context, query)`` on blocks of their own; blocks shuffled."""
    gen = torch.Generator().manual_seed(seed)
    shuffled = list(range(1, 4000))
    random.Random(seed).shuffle(shuffled)
    tables, ctx, qlens = [], [], []
    for shared_blocks, owns in families:
        prefix = [shuffled.pop() for _ in range(shared_blocks)]
        for own in owns:
            seq = shared_blocks * block_size + own
            tables.append(prefix + [shuffled.pop() for _ in range(-(-own // block_size))])
            ctx.append(seq - 1)
            qlens.append(1)
    for c, q in extra:
        tables.append([shuffled.pop() for _ in range(-(-(c + q) // block_size))])
        ctx.append(c)
        qlens.append(q)
    k_cache, v_cache = (torch.randn(4000, block_size, hk, d, generator=gen) for _ in range(2))
    meta = build_attention_metadata(qlens, ctx, tables, block_size)
    qkv = torch.randn(meta.num_tokens, hq + 2 * hk, d, generator=gen)
    query, key, value = qkv[:, :hq], qkv[:, hq : hq + hk], qkv[:, hq + hk :]
    write_kv_cache(key, value, k_cache, v_cache, meta.slot_mapping)
    return dict(query=query, key=key, value=value, k_cache=k_cache, v_cache=v_cache, meta=meta)


SHARED_CASES = [
    ([(8, [1, 5, 40, 17])], []),  # one family; a row whose own keys are just its new one
    ([(8, [3, 9]), (5, [20, 1, 7]), (1, [2, 2])], [(0, 9), (70, 1)]),  # families, one too short to share, others
    ([(6, [16] * 20)], [(40, 30)]),  # a family wider than one tile, beside a prefill chunk
]


@needs_cpp
@pytest.mark.parametrize("families,extra", SHARED_CASES)
@pytest.mark.parametrize("hq,hk,d", [(9, 3, 64), (14, 2, 64), (8, 2, 128), (4, 4, 16)])
@pytest.mark.parametrize("bf16", [False, True], ids=["f32-cache", "bf16-cache"])
def test_decode_rows_over_shared_blocks_match_reference(families: list, extra: list, hq: int, hk: int, d: int,
                                                         bf16: bool) -> None:
    """Decode rows whose requests share leading blocks (read once for all of them, the softmax parts
    merged) give the reference's outputs, as do the rows beside them; head dims 64 and 128 take the
    shared path, 16 the generic kernel (over a bfloat16 cache, a row's own keys within bfloat16
    rounding where the build multiplies in bfloat16: ``test_bfloat16_products_over_bfloat16_caches``)."""
    case = _shared_prefix_case(families, extra, 16, hq, hk, d, seed=hq + d)
    k_cache, v_cache = case["k_cache"], case["v_cache"]
    if bf16:
        k_cache, v_cache = k_cache.bfloat16(), v_cache.bfloat16()
    ref = paged_attention_reference(case["query"].contiguous(), k_cache.float(), v_cache.float(), case["meta"], 0.125)
    key, value = (case["key"].bfloat16().float(), case["value"].bfloat16().float()) if bf16 else (case["key"],
                                                                                                   case["value"])
    out = paged_attention_cpp(case["query"], key, value, k_cache, v_cache, case["meta"], 0.125)
    tol = 3e-2 if bf16 and cpp_build.bf16_products() and d % 64 == 0 else 2e-5  # own keys in bf16 products
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


@needs_cpp
@pytest.mark.parametrize("reqs", CASES)
@pytest.mark.parametrize("hq,hk,d", [(8, 2, 64), (4, 2, 128), (4, 4, 16)])  # AVX2 paths and the generic one
def test_bfloat16_caches_under_float32_queries(reqs: list[tuple[int, int]], hq: int, hk: int, d: int) -> None:
    """A bfloat16 KV cache under float32 queries reads as its exact float32 values: the torch path
    and the C++ kernel equal the float64 reference over the widened caches (this step's keys and
    values rounded alike, as the fresh-chunk path reads them), the C++ decode rows within bfloat16
    rounding where the build multiplies in bfloat16 (``test_bfloat16_products_over_bfloat16_caches``:
    its exact terms); the output stays float32."""
    case = _case(reqs, 16, hq, hk, d, torch.float32, seed=hq + d)
    k16, v16 = case["k_cache"].bfloat16(), case["v_cache"].bfloat16()
    key, value = case["key"].bfloat16().float(), case["value"].bfloat16().float()
    ref = paged_attention_reference(case["query"].contiguous(), k16.float(), v16.float(), case["meta"], 0.125)
    rounded_decode = cpp_build.bf16_products() and d % 64 == 0
    for attend in (paged_attention_cpp, paged_attention_torch):
        out = attend(case["query"], key, value, k16, v16, case["meta"], 0.125)
        assert out.dtype == torch.float32
        tol = 3e-2 if attend is paged_attention_cpp and rounded_decode else 2e-5
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def _bf16_products_reference(query: torch.Tensor, k16: torch.Tensor, v16: torch.Tensor, meta: AttentionMetadata,
                             scale: float) -> torch.Tensor:
    """Every query row in the stated bfloat16-product numerics, in float64: the scaled query rounded to
    bfloat16 against the cached keys it sees (its causal prefix), the softmax's numerators exp(s -
    max) rounded to bfloat16 against the cached values, divided by the numerators' unrounded sum.
    (The kernels round a block's numerators against the running maximum: the same values where a
    row sees at most one block of keys, 256.)"""
    hk, d, bs = k16.shape[2], k16.shape[3], k16.shape[1]
    group = query.shape[1] // hk
    starts, tables = meta.query_start_loc.tolist(), meta.block_tables.tolist()
    out = torch.empty_like(query)
    for i, n in enumerate(meta.seq_lens.tolist()):
        slots = torch.tensor([tables[i][p // bs] * bs + p % bs for p in range(n)])
        k = k16.reshape(-1, hk, d)[slots].double().repeat_interleave(group, dim=1)  # [n, Hq, D]
        v = v16.reshape(-1, hk, d)[slots].double().repeat_interleave(group, dim=1)
        rows = starts[i + 1] - starts[i]
        for r in range(rows):
            seen = n - rows + r + 1
            q = (query[starts[i] + r] * scale).bfloat16().double()  # [Hq, D]
            scores = torch.einsum("hd,khd->hk", q, k[:seen])
            numerators = (scores - scores.max(dim=-1, keepdim=True).values).exp()
            rounded = numerators.float().bfloat16().double()
            out[starts[i] + r] = (torch.einsum("hk,khd->hd", rounded, v[:seen]) / numerators.sum(-1, keepdim=True))
    return out


@needs_cpp
@pytest.mark.skipif(not cpp_build.bf16_products(), reason="the kernels of this CPU have no bfloat16 products")
@pytest.mark.parametrize("hq,hk,d", [(9, 3, 64), (14, 2, 64), (12, 2, 128), (4, 4, 64)])
def test_bfloat16_products_over_bfloat16_caches(hq: int, hk: int, d: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the build multiplies bfloat16 (AVX512_BF16), attention over a bfloat16 cache runs in
    bfloat16 products, decode rows (``attend_bf16.h``) and chunk tiles (``attend_tiled_bf16.h``) alike:
    equal to their float64 reference up to float32 arithmetic, for groups of one to seven query
    vectors, odd and even key counts (a last key pair of one), fresh chunks, chunks over context, one
    tile panel and several, and both head dims."""
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_FRESH_QUERY", 10**6)  # every chunk in the C++ tiles
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_CONTEXT_QUERY", 10**6)
    reqs = [(0, 1), (1, 1), (30, 1), (37, 1), (200, 1), (129, 1), (0, 7), (0, 40), (100, 33), (61, 3)]
    case = _case(reqs, 16, hq, hk, d, torch.float32, seed=hq * d)
    k16, v16 = case["k_cache"].bfloat16(), case["v_cache"].bfloat16()
    key, value = case["key"].bfloat16().float(), case["value"].bfloat16().float()
    out = paged_attention_cpp(case["query"], key, value, k16, v16, case["meta"], 0.125)
    ref = _bf16_products_reference(case["query"].contiguous(), k16, v16, case["meta"], 0.125)
    # 1e-3: a numerator whose float32 exp lands across a bfloat16 rounding boundary from the float64
    # one's rounds one step apart (2**-8 of it); the rounding itself moves outputs by ~1e-2.
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)


@needs_cpp
def test_rotary_writes_bfloat16_caches_rounded() -> None:
    """Under a float32 qkv the C++ rotary writes bfloat16 caches as the rotated k and v rounded to
    nearest even, the same as the torch path; a cache of another dtype is refused."""
    gen = torch.Generator().manual_seed(3)
    hq, hk, d, tokens = 4, 2, 64, 5
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, generator=gen)
    cos, sin = torch.randn(tokens, d, generator=gen), torch.randn(tokens, d, generator=gen)
    slots = torch.tensor([3, 0, 7, 1, 4])
    caches = {}
    for cpp in (True, False):
        k16, v16 = torch.zeros(2, 4, hk, d, dtype=torch.bfloat16), torch.zeros(2, 4, hk, d, dtype=torch.bfloat16)
        x = qkv.clone()
        rotary_and_cache(x, cos, sin, k16, v16, slots, hq, hk, cpp)
        caches[cpp] = (x, k16, v16)
    x, k16, v16 = caches[True]
    heads = x.view(tokens, hq + 2 * hk, d)
    assert torch.equal(k16.view(-1, hk, d)[slots], heads[:, hq : hq + hk].bfloat16())
    assert torch.equal(v16.view(-1, hk, d)[slots], heads[:, hq + hk :].bfloat16())
    torch.testing.assert_close(caches[True][0], caches[False][0], rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="caches share"):
        rotary_and_cache(qkv.clone(), cos, sin, torch.zeros(2, 4, hk, d, dtype=torch.float16),
                         torch.zeros(2, 4, hk, d, dtype=torch.float16), slots, hq, hk, True)


@needs_cpp
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cpp_attention_half_precision(dtype: torch.dtype) -> None:
    case = _case(CASES[2], 16, 8, 2, 64, dtype, seed=5)
    args = (case["k_cache"], case["v_cache"], case["meta"], 0.125)
    ref = paged_attention_reference(case["query"].contiguous(), *args).float()
    out = paged_attention_cpp(case["query"], case["key"], case["value"], *args)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@needs_cpp
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 16, 17])
@pytest.mark.parametrize("k,n", [(24, 40), (512, 1408)])
def test_small_linear_matches_torch(rows: int, k: int, n: int) -> None:
    """Up to SMALL_LINEAR_MAX_ROWS rows go to the C++ op (in groups of eight rows, any remainder),
    more to oneDNN, bfloat16 to F.linear itself: all equal F.linear (a bias too)."""
    gen = torch.Generator().manual_seed(rows + k)
    x, w, b = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen), torch.randn(n, generator=gen)
    torch.testing.assert_close(linear(x, w, cpp=True), F.linear(x, w), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(linear(x, w, b, cpp=True), F.linear(x, w, b), rtol=1e-4, atol=1e-4)
    half = linear(x.bfloat16(), w.bfloat16(), cpp=True)
    assert half.dtype == torch.bfloat16 and torch.equal(half, F.linear(x.bfloat16(), w.bfloat16()))


@needs_cpp
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_ops_match_torch(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    x, res = (torch.randn(5, 48, generator=gen).to(dtype) for _ in range(2))
    w = torch.randn(48, generator=gen).to(dtype)
    res_cpp, res_torch = res.clone(), res.clone()
    torch.testing.assert_close(rms_norm(x, w, 1e-6, res_cpp, cpp=True), rms_norm(x, w, 1e-6, res_torch), **tol)
    torch.testing.assert_close(res_cpp, res_torch, **tol)  # both added x into the residual
    torch.testing.assert_close(rms_norm(x, w, 1e-6, cpp=True), rms_norm(x, w, 1e-6), **tol)
    gate_up = torch.randn(5, 2 * 24, generator=gen).to(dtype)
    torch.testing.assert_close(silu_and_mul(gate_up, cpp=True), silu_and_mul(gate_up), **tol)
    hq, hk, d, tokens = 4, 2, 16, 6
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, generator=gen).to(dtype)
    pos = torch.tensor([0, 5, 9, 1, 2, 40], dtype=torch.float32)
    freqs = pos[:, None] * (1.0 / 10000 ** (torch.arange(0, d, 2) / d))[None, :]
    cos, sin = torch.cat([freqs, freqs], -1).cos().to(dtype), torch.cat([freqs, freqs], -1).sin().to(dtype)
    slots = torch.tensor([7, 17, 8, 9, 30, 21])  # block 0 (slots 0-3) is the null block
    results = []
    for cpp in (True, False):
        kc, vc, buf = torch.zeros(8, 4, hk, d, dtype=dtype), torch.zeros(8, 4, hk, d, dtype=dtype), qkv.clone()
        rotary_and_cache(buf, cos, sin, kc, vc, slots, hq, hk, cpp=cpp)
        results.append((buf, kc, vc))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, **tol)
    buf, kc, vc = results[0]
    heads = buf.view(tokens, hq + 2 * hk, d)
    assert torch.equal(kc.view(-1, hk, d)[slots], heads[:, hq : hq + hk])  # the rotated keys
    assert torch.equal(vc.view(-1, hk, d)[slots], heads[:, hq + hk :])
    assert torch.equal(heads[:, hq + hk :], qkv.view(tokens, hq + 2 * hk, d)[:, hq + hk :])  # v not rotated
    assert kc[0].abs().sum() == 0


def test_build_failure_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """No compiler: load_cpu_ops warns once and returns False; nothing raises."""
    monkeypatch.setattr(cpp_build, "_loaded", {})
    monkeypatch.setattr(cpp_build, "_active", {})
    monkeypatch.setattr(cpp_build, "_errors", {})
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(cpp_build.shutil, "which", lambda _name: None)
    with caplog.at_level("WARNING", logger="kernels.cpp_build"):
        assert cpp_build.load_cpu_ops() is False
        assert cpp_build.load_cpu_ops() is False
    warnings = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(warnings) == 1
    assert cpp_build.load_error() is not None


def test_env_switch_turns_kernels_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpp_build, "_loaded", {})
    monkeypatch.setattr(cpp_build, "_active", {})
    monkeypatch.setenv(cpp_build.ENV_SWITCH, "0")
    assert cpp_build.load_cpu_ops() is False
    assert cpp_build.load_error() is None


@needs_cpp
@pytest.mark.skipif(not cpp_build.bf16_products(), reason="the kernels of this CPU have no bfloat16 products")
@pytest.mark.parametrize("hq,hk,d", [(9, 3, 64), (12, 2, 128)])
def test_bfloat16_products_over_several_blocks_and_shared_prefixes(hq: int, hk: int, d: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The bfloat16 products where a row's softmax is assembled from parts: tiles over several blocks of
    256 keys (each block's numerators rounded against the running maximum, the outputs so far rescaled
    in the unpack's column order) and decode rows over shared prefixes (the shared tile's and the own
    keys' parts merged by their log-sum-exps). Their numerators round against a part's maximum, not
    the row's: within 5e-3 of the reference (a layout or merge error is off by O(1))."""
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_FRESH_QUERY", 10**6)
    monkeypatch.setattr(ATTENTION, "SDPA_MIN_CONTEXT_QUERY", 10**6)
    case = _case([(300, 1), (0, 300), (400, 33), (700, 1)], 16, hq, hk, d, torch.float32, seed=d)
    shared = _shared_prefix_case([(5, [5, 40, 17]), (20, [1, 300])], [(30, 1)], 16, hq, hk, d, seed=hq)  # >= 64 keys
    for c in (case, shared):
        k16, v16 = c["k_cache"].bfloat16(), c["v_cache"].bfloat16()
        key, value = c["key"].bfloat16().float(), c["value"].bfloat16().float()
        out = paged_attention_cpp(c["query"], key, value, k16, v16, c["meta"], 0.125)
        ref = _bf16_products_reference(c["query"].contiguous(), k16, v16, c["meta"], 0.125)
        torch.testing.assert_close(out, ref, rtol=5e-3, atol=5e-3)
