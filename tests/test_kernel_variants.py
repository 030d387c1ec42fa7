"""The C++ kernels per instruction-set variant (``kernels.isa``), chosen at run time.

Selection (core, no build): the variants a CPU supports follow its ``/proc/cpuinfo`` flags, best first;
``AGENT_ENGINE_ISA`` forces one and a variant the CPU lacks, or an unknown name, is a ``ValueError``;
a library's cache name depends on its variant and never on the machine it was built on.

Equivalence (builds each variant this CPU runs, about 30 s each on 2 cores; the others skip, naming the
missing features): every variant's ops, forced in place of the selected one, give the same results on
the same inputs: the quantized matmul within float32 summation order of the selected variant (which
``test_gguf_linear`` checks exactly against the int8 reference), the wide route against the exact
product and its bfloat16 form against the product of the rounded operands where the variant has it
(``bf16_products``; refused elsewhere), ``gguf_dequantize`` bit for bit; the float32 matmuls, norms and paged attention within float32 rounding of torch and the float64 oracle.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

from benchmarks.quant_bench import random_blocks
from kernels import build_attention_metadata, cpp_build, isa, paged_attention_reference, write_kv_cache
from kernels.paged_attention import paged_attention_cpp
from kernels.prepack import pack_weight
from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight, quant_matmul

AVX2_ONLY = frozenset({"sse2", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "abm"})
XEON_AVX512 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_vnni",
                           "avx512_bf16", "avx512_fp16"}
ZEN5 = XEON_AVX512 | {"avx_vnni"}
X86 = isa.VARIANTS[-1].name == "baseline"


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
@pytest.mark.parametrize("flags,expected", [
    (ZEN5, ["avx512_bf16", "avx512_vnni", "avx512", "avx2_vnni", "avx2", "baseline"]),
    (XEON_AVX512, ["avx512_bf16", "avx512_vnni", "avx512", "avx2", "baseline"]),
    (XEON_AVX512 - {"avx512_bf16"}, ["avx512_vnni", "avx512", "avx2", "baseline"]),
    (AVX2_ONLY, ["avx2", "baseline"]),
    (AVX2_ONLY - {"fma"}, ["baseline"]),
    (frozenset(), ["baseline"]),
], ids=["zen5", "xeon-avx512", "avx512-without-bf16", "avx2-only", "avx2-without-fma", "nothing"])
def test_supported_variants_follow_the_cpu_flags(flags: frozenset[str], expected: list[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(isa.ENV_FORCE, raising=False)
    assert [v.name for v in isa.supported_variants(flags)] == expected
    assert isa.selected_variant(flags).name == expected[0]


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_forcing_a_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(isa.ENV_FORCE, "avx2")
    assert isa.selected_variant(ZEN5).name == "avx2"
    monkeypatch.setenv(isa.ENV_FORCE, "avx512_vnni")
    with pytest.raises(ValueError, match="not supported by this CPU.*'avx2', 'baseline'"):
        isa.selected_variant(AVX2_ONLY)
    monkeypatch.setenv(isa.ENV_FORCE, "sse9")
    with pytest.raises(ValueError, match="'sse9' is unknown"):
        isa.selected_variant(ZEN5)


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_a_forced_variant_is_the_cpu_the_routes_see(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forcing ``avx2`` on an AVX-512 CPU with AMX routes as an AVX2 CPU: the vector features past AVX2
    and the AMX units are set aside (other flags stay); the bfloat16 variant keeps AMX; a name the CPU
    does not run forces nothing here (the engine refuses it where it is built)."""
    amx_xeon = XEON_AVX512 | {"amx_tile", "amx_bf16", "amx_int8", "avx512_vbmi"}
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: amx_xeon)
    monkeypatch.delenv(isa.ENV_FORCE, raising=False)
    assert isa.forced_variant() is None and isa.routing_flags() == amx_xeon
    monkeypatch.setenv(isa.ENV_FORCE, "avx2")
    assert isa.routing_flags() == AVX2_ONLY
    monkeypatch.setenv(isa.ENV_FORCE, "avx512_vnni")
    assert isa.routing_flags() == XEON_AVX512 - {"avx512_bf16", "avx512_fp16"}
    monkeypatch.setenv(isa.ENV_FORCE, "avx512_bf16")
    assert isa.routing_flags() == amx_xeon - {"avx512_fp16", "avx512_vbmi"}
    monkeypatch.setenv(isa.ENV_FORCE, "sse9")
    assert isa.forced_variant() is None and isa.routing_flags() == amx_xeon
    monkeypatch.setenv(isa.ENV_FORCE, "avx2")
    monkeypatch.setenv(isa.ENV_SWITCH, "0")  # the kernels off: the variable means nothing
    assert isa.forced_variant() is None and isa.routing_flags() == amx_xeon


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_a_forced_variant_caps_torchs_libraries_where_the_user_did_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: ZEN5)
    env: dict[str, str] = {}  # this process's environment stays as it is
    monkeypatch.setattr(os, "environ", env)
    assert isa.cap_libraries() == {}
    env[isa.ENV_FORCE] = "avx512_bf16"  # the best variant: nothing to cap
    assert isa.cap_libraries() == {}
    env[isa.ENV_FORCE] = "avx2"
    env["MKL_ENABLE_INSTRUCTIONS"] = "SSE4_2"  # the user's own choice stays
    assert isa.cap_libraries() == {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and env["MKL_ENABLE_INSTRUCTIONS"] == "SSE4_2"
    assert isa.cap_libraries() == {}  # already set
    assert isa.library_caps_set() == {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                                      "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    env.clear()
    env.update({isa.ENV_FORCE: "avx2", "DNNL_MAX_CPU_ISA": "AVX2_VNNI", "ATEN_CPU_CAPABILITY": ""})
    assert isa.cap_libraries() == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}  # oneDNN's old name
    assert isa.onednn_below_bf16()
    assert set(isa.LIBRARY_CAPS) < {v.name for v in isa.VARIANTS}


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_a_forced_variant_below_bf16_sets_amx_and_native_bf16_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    """No question to the OS, no oneDNN bfloat16 route: what an AVX2 CPU would have."""
    from kernels import amx

    amx_xeon = XEON_AVX512 | {"amx_tile", "amx_bf16", "amx_int8"}
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: amx_xeon)
    monkeypatch.setattr(amx, "cpu_flags", lambda *_: amx_xeon)
    monkeypatch.setattr(amx, "request_tile_state", lambda: pytest.fail("asked the OS for tiles set aside"))
    monkeypatch.setattr(amx, "amx_state", amx.amx_state.__wrapped__)
    monkeypatch.setenv(isa.ENV_FORCE, "avx2")
    state = amx.amx_state()
    assert state.set_aside and not state.usable and state.listed == ("amx_tile", "amx_bf16", "amx_int8")
    assert amx.describe() == "AMX: tile/bf16/int8 set aside" and not amx.native_bf16()
    monkeypatch.setenv(isa.ENV_FORCE, "avx512_bf16")
    monkeypatch.setattr(amx, "request_tile_state", lambda: (True, "granted by the OS"))
    assert amx.amx_state().usable and amx.native_bf16()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_vnni")  # oneDNN capped by the user: no route there
    assert not amx.native_bf16()
    monkeypatch.delenv(isa.ENV_FORCE)
    masked = XEON_AVX512 | {"amx_bf16"}  # a VM listing a unit without the tiles: not "set aside"
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: masked)
    monkeypatch.setattr(amx, "cpu_flags", lambda *_: masked)
    assert not amx.amx_state().set_aside and amx.amx_state().why == "not listed by the CPU"


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_a_forced_variant_or_a_library_cap_calibrates_under_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A route measured for the whole CPU is never read back where a forced variant or a cap on oneDNN
    takes a route away (oneDNN capped below bfloat16 refuses the bfloat16 matmul outright)."""
    from kernels import calibration_store

    monkeypatch.setattr(isa, "cpu_flags", lambda *_: ZEN5)
    monkeypatch.setattr(calibration_store, "active_variant", lambda: isa.VARIANTS[-1])
    monkeypatch.delenv(isa.ENV_FORCE, raising=False)
    key = calibration_store.store_key("linear", 1, {"n": 8}, 2)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    capped = calibration_store.store_key("linear", 1, {"n": 8}, 2)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setenv(isa.ENV_FORCE, "avx2")
    forced = calibration_store.store_key("linear", 1, {"n": 8}, 2)
    assert len({key, capped, forced}) == 3
    monkeypatch.delenv(isa.ENV_FORCE)
    assert calibration_store.store_key("linear", 1, {"n": 8}, 2) == key


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_every_flag_a_variant_compiles_with_is_one_it_requires() -> None:
    """The compiler may only emit what ``requires`` guarantees: the invariant that a supported variant
    never faults."""
    implied = {"-march=x86-64-v4": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx2", "fma"},
               "-march=x86-64-v3": {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "abm"},
               "-mavx512vnni": {"avx512_vnni"}, "-mavx512bf16": {"avx512_bf16"}, "-mavxvnni": {"avx_vnni"},
               "-march=x86-64": set(),
               "-mtune=generic": set()}
    for variant in isa.VARIANTS:
        assert set(variant.flags) <= set(implied), variant
        for flag in variant.flags:
            assert implied[flag] <= variant.requires, (variant.name, flag)
    assert len({v.namespace for v in isa.VARIANTS}) == len(isa.VARIANTS)
    assert all(v.bf16_products == ("-mavx512bf16" in v.flags) for v in isa.VARIANTS)


@pytest.mark.core
def test_cpuinfo_is_read_from_the_file(tmp_path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse2 avx2 fma\n\n"
                    "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu\n")
    assert isa.cpu_flags(info) == {"fpu", "sse2", "avx2", "fma"}
    assert isa.cpu_model(info) == "Test CPU 9000"
    assert isa.cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.core
def test_a_library_is_named_by_its_variant_not_by_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = {cpp_build.library_path(v) for v in isa.VARIANTS}
    assert len(paths) == len(isa.VARIANTS)
    here = cpp_build.library_path(isa.VARIANTS[0])
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: frozenset({"sse2"}))
    assert cpp_build.library_path(isa.VARIANTS[0]) == here
    assert "-march=native" not in cpp_build.compile_flags(isa.VARIANTS[-1]) or not X86


@pytest.mark.core
def test_every_kernel_source_and_header_is_part_of_the_librarys_name() -> None:
    """An edited header or source is a new library, never a stale one loaded from the cache."""
    csrc = cpp_build.SOURCES[0].parent
    assert set(cpp_build.HEADERS) == set(csrc.glob("*.h")) and "kquant_groups.h" in {h.name for h in cpp_build.HEADERS}
    assert set(cpp_build.SOURCES) == set(csrc.glob("*.cpp"))


def _missing(variant: isa.IsaVariant) -> str:
    return ", ".join(sorted(variant.requires - isa.cpu_flags()))


VARIANT_PARAMS = [pytest.param(v, id=v.name, marks=pytest.mark.skipif(
    not v.supported_by(isa.cpu_flags()), reason=f"this CPU lacks {_missing(v)}")) for v in isa.VARIANTS]


@pytest.fixture(params=VARIANT_PARAMS)
def variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[isa.IsaVariant]:
    """Each variant this CPU runs, its ops standing in for the selected variant's everywhere."""
    chosen: isa.IsaVariant = request.param
    if not cpp_build.load_variant(chosen):
        pytest.skip(f"the {chosen.name} kernels did not build: {cpp_build._errors.get(chosen.name)}")
    ops = cpp_build.variant_ops(chosen)
    for module in ("kernels.cpu_ops", "kernels.quant"):
        monkeypatch.setattr(f"{module}.ops", lambda: ops)
    # What the kernels in use decide (pair panels, the wide route's form) follows the variant too.
    monkeypatch.setattr("kernels.prepack.bf16_products", lambda: chosen.bf16_products)
    monkeypatch.setattr("kernels.quant_routes.bf16_products", lambda: chosen.bf16_products)
    from kernels import quant_routes

    monkeypatch.setattr(quant_routes._routes, "known", {})
    yield chosen


def _selected_quant(raw: torch.Tensor, qtype: int, k: int, x: torch.Tensor) -> torch.Tensor:
    """The selected variant's product (the one ``test_gguf_linear`` pins to the int8 reference)."""
    out = torch.empty(x.shape[0], raw.shape[0])
    cpp_build.variant_ops(isa.selected_variant()).gguf_linear_int8(out, x, [raw], [qtype])
    return out


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_gives_the_same_quantized_products(variant: isa.IsaVariant) -> None:
    for qtype in sorted(GGML_BLOCKS):
        k = 512 if GGML_BLOCKS[qtype][1] == 256 else 224  # 7 blocks of 32: an odd tail on the paired route
        n = 42  # not a multiple of four: the 256-bit route's groups of four weight rows leave a tail
        raw = torch.from_numpy(random_blocks(qtype, n, k, seed=qtype))
        weight = QuantWeight.from_gguf(raw, qtype, k)
        expected_weights = torch.empty(n, k)
        cpp_build.variant_ops(isa.selected_variant()).gguf_dequantize(expected_weights, raw, qtype)
        assert torch.equal(weight.dequantize(), expected_weights), GGML_BLOCKS[qtype][0]
        # 26 .. 31: wide steps (the K-quants' groups on the 256-bit route), every tail of x rows a pass
        for rows in (1, 5, 9, 26, 27, 28, 29, 31):
            x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
            got = quant_matmul(x, QuantMatmul.of([weight, weight.rows(torch.arange(n - 1, -1, -1))]))
            expected = _selected_quant(raw, qtype, k, x)
            scale = expected.abs().max().item()
            torch.testing.assert_close(got[:, :n], expected, rtol=0, atol=1e-5 * scale)
            torch.testing.assert_close(got[:, n:], expected.flip(1), rtol=0, atol=1e-5 * scale)


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_gives_the_same_float_kernels(variant: isa.IsaVariant) -> None:
    from kernels.cpu_ops import linear, rms_norm, silu_and_mul

    gen = torch.Generator().manual_seed(7)
    for rows, k, n in ((1, 64, 40), (7, 128, 33), (40, 96, 70)):
        x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen)
        torch.testing.assert_close(linear(x, w, None, True, pack_weight(w)), F.linear(x, w), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(linear(x, w, None, True), F.linear(x, w), rtol=1e-4, atol=1e-4)
    x, res, weight = (torch.randn(5, 96, generator=gen) for _ in range(3))
    torch.testing.assert_close(rms_norm(x, weight[0], 1e-6, res.clone(), cpp=True),
                               rms_norm(x, weight[0], 1e-6, res.clone()), rtol=1e-5, atol=1e-5)
    gate_up = torch.randn(5, 2 * 96, generator=gen)
    torch.testing.assert_close(silu_and_mul(gate_up, cpp=True), silu_and_mul(gate_up), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_gives_the_same_paged_attention(variant: isa.IsaVariant,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Decodes, a fresh chunk and a chunk over cached context, all on the C++ routes."""
    attention = importlib.import_module("kernels.paged_attention")
    monkeypatch.setattr(attention, "SDPA_MIN_FRESH_QUERY", 1 << 20)
    monkeypatch.setattr(attention, "SDPA_MIN_CONTEXT_QUERY", 1 << 20)
    reqs, block = [(0, 20), (37, 1), (130, 1), (40, 17)], 16
    tables, start = [], 1  # block 0 is the pool's null block
    for c, q in reqs:
        used = -(-(c + q) // block)
        tables.append(list(range(start, start + used)))
        start += used
    _assert_cpp_attention_matches_reference([q for _, q in reqs], [c for c, _ in reqs], tables, block, (8, 2, 64),
                                            seed=11)


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_attends_over_a_bfloat16_cache(variant: isa.IsaVariant, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bfloat16 cache under float32 queries (a bfloat16 model's default): read back exactly where the
    variant has no bfloat16 products, multiplied in them (within bfloat16 rounding) where it has."""
    attention = importlib.import_module("kernels.paged_attention")
    monkeypatch.setattr(attention, "SDPA_MIN_FRESH_QUERY", 1 << 20)
    monkeypatch.setattr(attention, "SDPA_MIN_CONTEXT_QUERY", 1 << 20)
    tables = [[1, 2], [3, 4, 5, 6, 7, 8, 9, 10, 11], [12, 13, 14, 15]]
    _assert_cpp_attention_matches_reference([20, 1, 17], [0, 130, 40], tables, 16, (9, 3, 64), seed=13,
                                            cache_dtype=torch.bfloat16,
                                            tol=3e-2 if variant.bf16_products else 2e-5)


def _assert_cpp_attention_matches_reference(query_lens: list[int], context_lens: list[int], tables: list[list[int]],
                                            block: int, heads: tuple[int, int, int], seed: int,
                                            cache_dtype: torch.dtype = torch.float32, tol: float = 2e-5) -> None:
    """Random caches (as many blocks as the tables name, in ``cache_dtype``) and float32 queries
    ``heads`` = (Hq, Hk, D): the C++ attention of the step equals the float64 reference over the
    caches' values within ``tol``."""
    hq, hk, d = heads
    gen = torch.Generator().manual_seed(seed)
    blocks = 1 + max(b for t in tables for b in t)
    k_cache, v_cache = (torch.randn(blocks, block, hk, d, generator=gen).to(cache_dtype) for _ in range(2))
    meta = build_attention_metadata(query_lens, context_lens, tables, block)
    qkv = torch.randn(meta.num_tokens, hq + 2 * hk, d, generator=gen)
    if cache_dtype != torch.float32:  # this step's keys and values as the cache holds them
        qkv[:, hq:] = qkv[:, hq:].to(cache_dtype).float()
    query, key, value = qkv[:, :hq], qkv[:, hq : hq + hk], qkv[:, hq + hk :]
    write_kv_cache(key, value, k_cache, v_cache, meta.slot_mapping)
    expected = paged_attention_reference(query.contiguous(), k_cache.float(), v_cache.float(), meta, 0.125)
    got = paged_attention_cpp(query, key, value, k_cache, v_cache, meta, 0.125)
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_gives_the_dequantized_product_on_the_wide_route(variant: isa.IsaVariant) -> None:
    ops = cpp_build.variant_ops(variant)
    for qtype in sorted(GGML_BLOCKS):
        k = 768 if GGML_BLOCKS[qtype][1] == 256 else 608
        weight = QuantWeight.from_gguf(torch.from_numpy(random_blocks(qtype, 30, k, seed=qtype)), qtype, k)
        for rows in (1, 17, 40):
            x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
            out = torch.empty(rows, 30)
            ops.gguf_linear_wide(out, x, [weight.raw], [qtype])
            expected = x.double() @ weight.dequantize().double().T
            torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5 * expected.abs().max().item())
            if not variant.bf16_products:
                with pytest.raises(RuntimeError, match="AVX512_BF16"):
                    ops.gguf_linear_wide(out, x, [weight.raw], [qtype], True)
                continue
            ops.gguf_linear_wide(out, x, [weight.raw], [qtype], True)  # both operands rounded, float32 sums
            expected = x.bfloat16().double() @ weight.dequantize().bfloat16().double().T
            torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5 * expected.abs().max().item())


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_attends_decode_rows_over_shared_blocks(variant: isa.IsaVariant) -> None:
    """Five decode rows whose requests share their first six blocks, beside a prefill chunk."""
    block = 16
    shared, own = list(range(1, 7)), [3, 20, 1, 16, 40]
    tables, start, ctx = [], 7, []
    for n in own:
        used = -(-n // block)
        tables.append(shared + list(range(start, start + used)))
        ctx.append(6 * block + n - 1)
        start += used
    tables.append(list(range(start, start + 3)))
    _assert_cpp_attention_matches_reference([1] * len(own) + [40], ctx + [0], tables, block, (9, 3, 64), seed=12)


@pytest.mark.skipif(not cpp_build.load_cpu_ops(), reason="the C++ kernels did not build")
def test_every_variant_fuses_gate_up_and_silu_exactly(variant: isa.IsaVariant) -> None:
    """``panel_linear_silu`` on interleaved gate/up panels equals ``panel_linear`` then ``silu_and_mul`` on
    the plain panels bit for bit where the micro-kernel runs (K <= 1,024: the same sums; the scalar build
    goes through ATen, within float32 rounding), for float32 and bfloat16 weights (in pair panels where
    the variant has bfloat16 products), and torch's silu(gate) * up within float32 rounding (of x rounded
    to bfloat16 on the pair route)."""
    from kernels.prepack import pack_gate_up

    ops = cpp_build.variant_ops(variant)
    gen = torch.Generator().manual_seed(13)
    for inter, k, dtype in ((48, 64, torch.float32), (96, 40, torch.float32), (32, 64, torch.bfloat16),
                            (48, 63, torch.bfloat16)):
        w = (torch.randn(2 * inter, k, generator=gen) * 0.1).to(dtype)
        for rows in (1, 5, 13, 40):
            x = torch.randn(rows, k, generator=gen)
            gate_up, unfused, fused = torch.empty(rows, 2 * inter), torch.empty(rows, inter), torch.empty(rows, inter)
            pairs = variant.bf16_products  # bfloat16 pair panels where the variant multiplies them
            ops.panel_linear(gate_up, x, pack_weight(w, pairs))
            ops.silu_and_mul(unfused, gate_up)
            ops.panel_linear_silu(fused, x, pack_gate_up(w, inter, pairs))
            if variant.name == "baseline":
                torch.testing.assert_close(fused, unfused, rtol=1e-5, atol=1e-6)
            else:
                assert torch.equal(fused, unfused), (inter, k, dtype, rows)
            wf = w.float()
            if pairs and dtype == torch.bfloat16:  # x rounded to bfloat16 on the pair route
                x = x.bfloat16().float()
            expected = F.silu(x @ wf[:inter].T) * (x @ wf[inter:].T)
            torch.testing.assert_close(fused, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.core
@pytest.mark.skipif(not X86, reason="the variants below are x86-64's")
def test_a_variant_that_does_not_build_gives_way_to_the_next(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """A toolchain too old for the best variant's flags: the next supported variant that builds serves
    (one warning naming both); forced by ``AGENT_ENGINE_ISA``, there is no substitute."""
    monkeypatch.delenv(isa.ENV_FORCE, raising=False)
    monkeypatch.delenv(cpp_build.ENV_SWITCH, raising=False)
    monkeypatch.setattr(isa, "cpu_flags", lambda *_: ZEN5)
    monkeypatch.setattr(cpp_build, "_errors", {"avx512_bf16": "RuntimeError: g++: unrecognized -mavx512bf16"})
    monkeypatch.setattr(cpp_build, "_loaded", {"avx512_bf16": False, "avx512_vnni": True})
    monkeypatch.setattr(cpp_build, "_warned", set())
    monkeypatch.setattr(cpp_build, "_active", {})
    with caplog.at_level("WARNING", logger="kernels.cpp_build"):
        assert cpp_build.active_variant().name == "avx512_vnni"
        assert cpp_build.active_variant().name == "avx512_vnni"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "avx512_bf16" in warnings[0] and "using avx512_vnni" in warnings[0]
    monkeypatch.setenv(isa.ENV_FORCE, "avx512_bf16")
    assert cpp_build.active_variant() is None and not cpp_build.load_cpu_ops()


@pytest.mark.core
def test_benchmark_lines_name_the_kernels_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables and JSON name the variant that actually serves (after a fallback too), or the torch path."""
    from agent_engine.reporting import machine_info, machine_line

    fallback = isa.VARIANTS[-1]
    monkeypatch.setattr(cpp_build, "active_variant", lambda: fallback)
    assert machine_info()["kernel_isa"] == fallback.name and f"kernels {fallback.name}" in machine_line()
    monkeypatch.setattr(cpp_build, "active_variant", lambda: None)
    assert machine_info()["kernel_isa"] == "none (torch path)" and "torch path" in machine_line()
    monkeypatch.delenv(isa.ENV_FORCE, raising=False)
    assert machine_info()["forced_isa"] is None and "forced" not in machine_line()
    monkeypatch.setenv(isa.ENV_FORCE, "baseline")  # every x86-64 CPU runs it
    if X86:
        assert machine_info()["forced_isa"] == "baseline" and "forced by AGENT_ENGINE_ISA" in machine_line()
