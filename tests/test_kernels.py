"""Paged attention == dense causal attention; fast path == reference; KV write places tokens right."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from kernels import (
    AttentionWorkspace,
    build_attention_metadata,
    flash_attn_available,
    paged_attention,
    paged_attention_reference,
    paged_attention_torch,
    write_kv_cache,
)

pytestmark = pytest.mark.core

HEAD_DIM = 16


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _make_case(
    reqs: list[tuple[int, int]],
    block_size: int,
    num_q_heads: int,
    num_kv_heads: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> dict:
    """Random case: request i has ``reqs[i] = (context_len, query_len)``; its context is already cached.

    Blocks are handed out shuffled (non-contiguous). Returns tensors for the step plus full per-request
    Q/K/V so the test can run dense attention.
    """
    gen = torch.Generator().manual_seed(seed)
    need = sum(_cdiv(c + q, block_size) for c, q in reqs)
    num_blocks = need + 3
    free = list(range(1, num_blocks))
    random.Random(seed).shuffle(free)
    k_cache = torch.randn(num_blocks, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(device, dtype)
    v_cache = torch.randn(num_blocks, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(device, dtype)
    tables, full_q, full_k, full_v = [], [], [], []
    for ctx, q in reqs:
        seq = ctx + q
        table = [free.pop() for _ in range(_cdiv(seq, block_size))]
        tables.append(table)
        full_q.append(torch.randn(seq, num_q_heads, HEAD_DIM, generator=gen).to(device, dtype))
        full_k.append(torch.randn(seq, num_kv_heads, HEAD_DIM, generator=gen).to(device, dtype))
        full_v.append(torch.randn(seq, num_kv_heads, HEAD_DIM, generator=gen).to(device, dtype))
        if ctx:
            slots = torch.tensor(
                [table[p // block_size] * block_size + p % block_size for p in range(ctx)], device=device
            )
            write_kv_cache(full_k[-1][:ctx], full_v[-1][:ctx], k_cache, v_cache, slots)
    meta = build_attention_metadata(
        [q for _, q in reqs], [c for c, _ in reqs], tables, block_size, device, AttentionWorkspace()
    )
    query = torch.cat([fq[c:] for fq, (c, _) in zip(full_q, reqs, strict=True)])
    key = torch.cat([fk[c:] for fk, (c, _) in zip(full_k, reqs, strict=True)])
    value = torch.cat([fv[c:] for fv, (c, _) in zip(full_v, reqs, strict=True)])
    write_kv_cache(key, value, k_cache, v_cache, meta.slot_mapping)
    return dict(
        meta=meta, query=query, key=key, value=value, k_cache=k_cache, v_cache=v_cache,
        full=(full_q, full_k, full_v), reqs=reqs,
    )


def _dense(case: dict, scale: float) -> torch.Tensor:
    """Dense causal attention per request over its whole sequence, rows of this step only (float64)."""
    full_q, full_k, full_v = case["full"]
    outs = []
    for (ctx, _), q, k, v in zip(case["reqs"], full_q, full_k, full_v, strict=True):
        group = q.shape[1] // k.shape[1]
        qd = q.double().transpose(0, 1)
        kd = k.double().repeat_interleave(group, dim=1).transpose(0, 1)
        vd = v.double().repeat_interleave(group, dim=1).transpose(0, 1)
        o = F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, scale=scale)
        outs.append(o.transpose(0, 1)[ctx:])
    return torch.cat(outs)


MIXED = [(0, 7), (5, 1), (13, 9), (30, 1), (0, 1), (17, 1), (3, 4)]


@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("group", [1, 2, 4])
def test_paged_equals_dense_mixed_batch(block_size: int, group: int) -> None:
    case = _make_case(MIXED, block_size, num_q_heads=2 * group, num_kv_heads=2, seed=block_size * 10 + group)
    scale = HEAD_DIM**-0.5
    expected = _dense(case, scale)
    args = (case["k_cache"], case["v_cache"], case["meta"], scale)
    ref = paged_attention_reference(case["query"], *args)
    fast = paged_attention_torch(case["query"], case["key"], case["value"], *args)
    torch.testing.assert_close(ref.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "reqs",
    [
        [(9, 1), (0, 1), (40, 1)],  # all decode: the one-SDPA path returns directly
        [(0, 23)],  # one fresh prefill
        [(6, 11)],  # one chunk after a partial-block context
        [(0, 5), (4, 3), (21, 2)],  # prefills only
    ],
)
def test_fast_path_shapes(reqs: list[tuple[int, int]]) -> None:
    case = _make_case(reqs, block_size=4, num_q_heads=4, num_kv_heads=2, seed=7)
    scale = 0.3
    fast = paged_attention(
        case["query"], case["key"], case["value"], case["k_cache"], case["v_cache"], case["meta"], scale
    )
    torch.testing.assert_close(fast.double(), _dense(case, scale), rtol=1e-5, atol=1e-5)


def test_request_reads_blocks_written_by_another_request_in_same_step() -> None:
    """Prefix sharing: B's context blocks are A's blocks, written in this very step."""
    block_size, hq, hk = 4, 4, 2
    gen = torch.Generator().manual_seed(3)
    k_cache = torch.zeros(8, block_size, hk, HEAD_DIM)
    v_cache = torch.zeros_like(k_cache)
    qa, ka, va = (torch.randn(8, h, HEAD_DIM, generator=gen) for h in (hq, hk, hk))
    qb, kb, vb = (torch.randn(3, h, HEAD_DIM, generator=gen) for h in (hq, hk, hk))
    # A prefills 8 tokens into blocks [1, 2]; B has those 8 tokens as context and adds 3 in block 3.
    meta = build_attention_metadata([8, 3], [0, 8], [[1, 2], [1, 2, 3]], block_size)
    # A's slots are written once; B's new tokens go to block 3. (Slot mapping covers new tokens only.)
    key, value, query = torch.cat([ka, kb]), torch.cat([va, vb]), torch.cat([qa, qb])
    write_kv_cache(key, value, k_cache, v_cache, meta.slot_mapping)
    out = paged_attention_torch(query, key, value, k_cache, v_cache, meta, 0.25)
    ref = paged_attention_reference(query, k_cache, v_cache, meta, 0.25)
    full_q = torch.cat([qa, qb]).double().transpose(0, 1)
    full_k = torch.cat([ka, kb]).double().repeat_interleave(2, 1).transpose(0, 1)
    full_v = torch.cat([va, vb]).double().repeat_interleave(2, 1).transpose(0, 1)
    dense = F.scaled_dot_product_attention(full_q, full_k, full_v, is_causal=True, scale=0.25).transpose(0, 1)
    torch.testing.assert_close(out[8:].double(), dense[8:], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[:8].double(), dense[:8], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ref, out, rtol=1e-5, atol=1e-5)


def test_write_kv_cache_places_tokens_at_slots() -> None:
    k_cache = torch.zeros(5, 4, 2, 3)
    v_cache = torch.zeros(5, 4, 2, 3)
    key = torch.arange(3 * 2 * 3, dtype=torch.float32).view(3, 2, 3) + 1
    value = -key
    slots = torch.tensor([1 * 4 + 3, 4 * 4 + 0, 2 * 4 + 1])
    write_kv_cache(key, value, k_cache, v_cache, slots)
    torch.testing.assert_close(k_cache[1, 3], key[0])
    torch.testing.assert_close(k_cache[4, 0], key[1])
    torch.testing.assert_close(v_cache[2, 1], value[2])
    assert k_cache.count_nonzero() == key.numel()
    assert v_cache.count_nonzero() == value.numel()
    assert k_cache[0].count_nonzero() == 0  # the null block stays untouched


def test_metadata_slot_mapping_and_padding() -> None:
    meta = build_attention_metadata([3, 1], [2, 5], [[7, 3], [2, 9, 4]], block_size=4)
    assert meta.slot_mapping.tolist() == [7 * 4 + 2, 7 * 4 + 3, 3 * 4 + 0, 9 * 4 + 1]
    assert meta.block_tables.tolist() == [[7, 3], [2, 9]]
    assert meta.query_start_loc.tolist() == [0, 3, 4]
    assert meta.seq_lens.tolist() == [5, 6]
    assert meta.cu_seqlens_k.tolist() == [0, 5, 11]
    assert (meta.max_query_len, meta.max_seq_len) == (3, 6)
    with pytest.raises(ValueError):
        build_attention_metadata([3], [2], [[1]], block_size=4)  # needs 2 blocks
    with pytest.raises(ValueError):
        build_attention_metadata([1], [0], [[0]], block_size=4)  # the null block is not a real block


def test_a_decode_step_takes_the_slots_the_tensor_route_gives() -> None:
    """A step of decodes alone builds its slots from the lists; they equal the tensor route's for the
    same tables, and a short table or a null block in use is refused with the request it belongs to."""
    import random

    from kernels.attention_metadata import _slots_and_positions

    rng = random.Random(0)
    for num_reqs in (1, 3, 17):
        context = [rng.randrange(0, 200) for _ in range(num_reqs)]
        tables = [rng.sample(range(1, 500), -(-(c + 1) // 16) + rng.randrange(0, 3)) for c in context]
        meta = build_attention_metadata([1] * num_reqs, context, tables, block_size=16)
        slots, positions = _slots_and_positions(meta.block_tables, meta.context_lens, torch.ones(num_reqs,
                                                dtype=torch.int64), num_reqs, 16)
        assert meta.slot_mapping.tolist() == slots.tolist()
        assert meta.positions.tolist() == positions.tolist() == context
    with pytest.raises(ValueError, match=r"request 1: needs 2 non-null blocks, got \[5, 0\]"):
        build_attention_metadata([1, 1], [3, 16], [[4], [5]], block_size=16)
    with pytest.raises(ValueError, match="request 0: needs 1 non-null blocks"):
        build_attention_metadata([1], [3], [[0, 7]], block_size=16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_cuda_paths_match_reference(dtype: torch.dtype) -> None:
    block_size = 256 if flash_attn_available() and dtype != torch.float32 else 16
    case = _make_case(
        [(0, 300), (270, 1), (513, 40), (5, 1)], block_size, 8, 2, seed=1, dtype=dtype, device="cuda"
    )
    scale = HEAD_DIM**-0.5
    args = (case["k_cache"], case["v_cache"], case["meta"], scale)
    ref = paged_attention_reference(case["query"], *args).float()
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    out = paged_attention(case["query"], case["key"], case["value"], *args)
    torch.testing.assert_close(out.float(), ref, rtol=tol, atol=tol)
    torch_out = paged_attention_torch(case["query"], case["key"], case["value"], *args)
    torch.testing.assert_close(torch_out.float(), ref, rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_triton_decode_matches_reference(dtype: torch.dtype) -> None:
    """The Triton paged-decode kernel on the GPU: decode rows of 1 to 700 keys, GQA 4:1, against the
    float64 reference."""
    from kernels.triton_decode import paged_decode_triton

    case = _make_case([(0, 1), (16, 1), (300, 1), (699, 1), (40, 1)], 16, 8, 2, seed=3, dtype=dtype, device="cuda")
    meta = case["meta"]
    ref = paged_attention_reference(case["query"], case["k_cache"], case["v_cache"], meta, HEAD_DIM**-0.5).float()
    out = paged_decode_triton(case["query"], case["k_cache"], case["v_cache"], meta.block_tables, meta.seq_lens,
                              HEAD_DIM**-0.5)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), ref, rtol=tol, atol=tol)
