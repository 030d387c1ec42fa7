"""The second tier's bytes (``kernels.kv_offload``) and an engine that demotes and reloads: the greedy
tokens of a job reloaded from the tier equal those of a pool large enough to keep it."""

from __future__ import annotations

import pytest
import torch

from agent_engine import JobHints, LLMEngine, SamplingParams
from agent_engine.config import EngineConfig
from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.metrics import ServerMetrics
from kernels import allocate_kv_caches
from kernels.cpp_build import load_cpu_ops
from kernels.kv_offload import HostKVStore
from scheduler.tier_copy import LOAD, OFFLOAD_DTYPES, SAVE, KVBlockShape, store_block_bytes, tier_blocks


def _caches(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    caches = allocate_kv_caches(2, 6, 4, 2, 8, torch.float32, "cpu")
    g = torch.Generator().manual_seed(seed)
    for k, v in caches:
        k.copy_(torch.randn(k.shape, generator=g))
        v.copy_(torch.randn(v.shape, generator=g))
    return caches


@pytest.mark.core
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["auto", "bfloat16", "int8"])
def test_the_fused_cpu_copy_is_bit_identical_to_the_torch_path(kind: str, pool_dtype: torch.dtype) -> None:
    """``kv_tier_copy`` (one C++ call over every layer) and the per-layer torch ops store and load the same
    bits, for every store form of a float32 or bfloat16 pool (a bfloat16 model's default)."""
    copies = [(SAVE, 1, 2), (SAVE, 3, 0), (SAVE, 2, 2), (LOAD, 2, 4), (LOAD, 0, 5), (SAVE, 5, 1), (LOAD, 1, 1)]
    results = []
    for fused in (True, False):
        caches = [(k.to(pool_dtype), v.to(pool_dtype)) for k, v in _caches(seed=3)]
        for k, _ in caches:  # block 3, head 0: absmax 127, so scale 1 and these sit exactly on halves
            k[3, :, 0, :] = 0.25
            k[3, 0, 0, :5] = torch.tensor([0.5, -0.5, 1.5, -2.5, 127.0]).to(pool_dtype)
        store = HostKVStore(3, caches, kind)
        if not fused:
            store.fused = False
        else:
            assert store.fused == load_cpu_ops()
        store.apply(copies)
        results.append((caches, store))
    (fc, fs), (tc, ts) = results
    for (fk, fv), (tk, tv) in zip(fc, tc, strict=True):
        assert torch.equal(fk, tk) and torch.equal(fv, tv)
    for (fk, fv), (tk, tv) in zip(fs.data, ts.data, strict=True):
        assert torch.equal(fk[:2], tk[:2]) and torch.equal(fv[:2], tv[:2])  # slot 2 was loaded and refilled


@pytest.mark.core
@pytest.mark.parametrize(("kind", "tol"), [("auto", 0.0), ("bfloat16", 1e-2), ("int8", 2e-2)])
def test_blocks_round_trip_through_the_store(kind: str, tol: float) -> None:
    caches = _caches()
    want = [(k[1:3].clone(), v[1:3].clone()) for k, v in caches]
    store = HostKVStore(3, caches, kind)
    store.apply([(SAVE, 1, 2), (SAVE, 2, 0)])
    for k, v in caches:  # the pool blocks are reused for something else
        k[1:3].zero_()
        v[1:3].zero_()
    store.apply([(LOAD, 2, 4), (LOAD, 0, 5)])
    for (k, v), (wk, wv) in zip(caches, want, strict=True):
        scale = wk.abs().max()
        assert (k[4:6] - wk).abs().max() <= tol * scale and (v[4:6] - wv).abs().max() <= tol * scale
        assert k[1:3].abs().max() == 0  # only the loaded blocks changed


@pytest.mark.core
def test_int8_errs_by_at_most_half_a_step_of_its_block_and_head() -> None:
    """Symmetric int8 with one scale per (block, head): |error| <= absmax(block, head) / 254."""
    caches = _caches(2)
    want = [(k[1:4].clone(), v[1:4].clone()) for k, v in caches]
    store = HostKVStore(3, caches, "int8")
    store.apply([(SAVE, 1, 0), (SAVE, 2, 1), (SAVE, 3, 2), (LOAD, 0, 1), (LOAD, 1, 2), (LOAD, 2, 3)])
    for (k, v), (wk, wv) in zip(caches, want, strict=True):
        for got, ref in ((k[1:4], wk), (v[1:4], wv)):
            bound = ref.abs().amax(dim=(1, 3), keepdim=True) / 254 + 1e-6  # [blocks, 1, heads, 1]
            assert ((got - ref).abs() <= bound).all()


@pytest.mark.core
def test_the_listed_order_is_kept_and_a_slot_written_twice_keeps_the_last() -> None:
    caches = _caches(1)
    store = HostKVStore(2, caches)
    b1, b2 = caches[0][0][1].clone(), caches[0][0][2].clone()
    # Slot 0 gets block 1, is loaded into block 3, then refilled with block 2 and loaded into block 4.
    store.apply([(SAVE, 1, 0), (LOAD, 0, 3), (SAVE, 2, 0), (SAVE, 2, 1), (SAVE, 1, 1), (LOAD, 0, 4), (LOAD, 1, 5)])
    k = caches[0][0]
    assert torch.equal(k[3], b1) and torch.equal(k[4], b2) and torch.equal(k[5], b1)


@pytest.mark.core
def test_store_sizes() -> None:
    pool_bytes = 2 * 2 * 4 * 2 * 8 * 4  # layers x K/V x block x heads x dim x fp32
    block = KVBlockShape(pool_bytes, itemsize=4, num_layers=2, num_kv_heads=2)
    assert store_block_bytes(block, "auto") == pool_bytes
    assert store_block_bytes(block, "bfloat16") == pool_bytes // 2
    assert store_block_bytes(block, "int8") == pool_bytes // 4 + 2 * 2 * 2 * 4
    for form in OFFLOAD_DTYPES:
        assert HostKVStore(3, _caches(), form).nbytes == 3 * store_block_bytes(block, form)
        assert tier_blocks(HostKVStore(3, _caches(), form).nbytes, block, form) == 3


def _turn(eng: LLMEngine, rid: str, prompt: list[int], job: str) -> RequestOutput:
    sp = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    eng.add_request(eng.make_request(rid, prompt, sp, JobHints.for_job(job)))
    while True:
        for o in eng.step():
            if o.request_id == rid and o.finished:
                return o


@pytest.mark.slow
def test_a_job_reloaded_from_the_tier_decodes_what_a_big_pool_decodes() -> None:
    """A tiny pool forces the first turn's blocks out while another job runs; its next turn loads them
    back (counted as cached tokens) and samples exactly the tokens of a pool that never evicted."""
    first = list(range(300, 364))  # 4 full blocks of 16
    other = list(range(500, 596))  # 6 blocks: evicts the first job's cached blocks

    def run(eng: LLMEngine) -> tuple[list[int], int]:
        out1 = _turn(eng, "a1", first, "a")
        _turn(eng, "b1", other, "b")
        out2 = _turn(eng, "a2", first + out1.outputs[0].token_ids + [7, 8, 9], "a")
        return out2.outputs[0].token_ids, out2.num_cached_tokens

    big_tokens, big_cached = run(LLMEngine(EngineConfig(num_kv_blocks=64, max_model_len=256)))
    tiered = LLMEngine(EngineConfig(num_kv_blocks=9, max_model_len=128, kv_offload_bytes="8M"))
    tier_tokens, tier_cached = run(tiered)
    counters = tiered.scheduler.kv.tier.counters
    assert counters.stored > 0 and counters.reloaded >= 3
    assert tier_tokens == big_tokens and tier_cached == big_cached >= 64
    stats = tiered.stats()
    assert stats.scheduler.tier is not None and stats.tier_store is not None
    assert stats.scheduler.tier.reloaded == counters.reloaded
    assert stats.tier_store.load_seconds > 0 and stats.tier_store.bytes > 0
    text = ServerMetrics().render(tiered.stats()).decode()
    assert f"agent_engine_kv_tier_reloaded_total {float(counters.reloaded)}" in text
    assert "agent_engine_kv_tier_capacity_blocks" in text and "agent_engine_kv_tier_hit_tokens_total" in text
