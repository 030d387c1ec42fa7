"""Greedy parity: the paged engine's tokens equal transformers' own ``generate`` on the same weights.

Covers a batch of 16 prompts of 1..600 tokens, (a) shared prefixes hitting the prefix cache, (b) chunked prefill whose chunks straddle blocks, (c) a KV pool so small that
preemption and recompute happen, (d) bfloat16, (e) the same on CUDA against transformers on CUDA (``gpu``). float32 must match exactly; bfloat16 gets a stated
tolerance because our attention and HF's sum in different orders and bf16 keeps 8 bits of mantissa.
"""

from __future__ import annotations

import random

import pytest
import torch

from agent_engine import LLM, SamplingParams
from agent_engine.model.default_model import default_model_dir
from kernels.cpp_build import bf16_products

pytestmark = pytest.mark.slow

NEW_TOKENS = 12
LENGTHS = [1, 2, 3, 5, 8, 15, 16, 17, 31, 33, 64, 100, 128, 250, 400, 600]


def _prompts(vocab: int) -> list[list[int]]:
    rng = random.Random(1234)
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in LENGTHS]


def _shared_prefix_prompts(vocab: int) -> list[list[int]]:
    rng = random.Random(99)
    prefix = [rng.randrange(3, vocab) for _ in range(150)]
    return [prefix + [rng.randrange(3, vocab) for _ in range(rng.randint(1, 40))] for _ in range(8)]


def _hf_greedy(prompts: list[list[int]], dtype: torch.dtype, device: str = "cpu") -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(default_model_dir(), dtype=dtype).to(device).eval()
    gen_cfg = model.generation_config
    gen_cfg.eos_token_id = None  # our side runs with ignore_eos, so neither may stop early
    out = []
    with torch.inference_mode():
        for p in prompts:
            ids = torch.tensor([p], device=device)
            g = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen_cfg,
                               max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
            out.append(g[0, len(p):].tolist())
    return out


@pytest.fixture(scope="module")
def vocab() -> int:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(default_model_dir()).vocab_size


@pytest.fixture(scope="module")
def reference(vocab: int) -> dict[str, list[list[int]]]:
    return {
        "mixed": _hf_greedy(_prompts(vocab), torch.float32),
        "shared": _hf_greedy(_shared_prefix_prompts(vocab), torch.float32),
    }


def _engine_greedy(llm: LLM, prompts: list[list[int]]) -> list[list[int]]:
    sp = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    assert all(o.outputs[0].finish_reason == "length" for o in outs)
    return [o.outputs[0].token_ids for o in outs]


def _agreement(got: list[list[int]], ref: list[list[int]]) -> tuple[int, float]:
    """(prompts whose first token matches, mean share of leading tokens the sequences share)."""
    def common(a: list[int], b: list[int]) -> int:
        n = 0
        while n < len(a) and a[n] == b[n]:
            n += 1
        return n

    first = sum(a[0] == b[0] for a, b in zip(got, ref, strict=True))
    return first, sum(common(a, b) for a, b in zip(got, ref, strict=True)) / (len(ref) * NEW_TOKENS)


def test_parity_mixed_lengths(vocab: int, reference: dict) -> None:
    llm = LLM(num_kv_blocks=256, max_model_len=1024)
    assert _engine_greedy(llm, _prompts(vocab)) == reference["mixed"]
    assert llm.engine.scheduler.kv.pool.num_used_blocks == 0


def test_parity_shared_prefix_hits_cache(vocab: int, reference: dict) -> None:
    llm = LLM(num_kv_blocks=256, max_model_len=1024)
    prompts = _shared_prefix_prompts(vocab)
    assert _engine_greedy(llm, prompts[:1]) == reference["shared"][:1]  # computes the shared prefix
    assert llm.engine.scheduler.kv.prefix_hit_tokens == 0
    assert _engine_greedy(llm, prompts) == reference["shared"]  # every request hits its 144 cached tokens
    assert llm.engine.scheduler.kv.prefix_hit_tokens >= 8 * 144


def test_parity_chunked_prefill_straddling_blocks(vocab: int, reference: dict) -> None:
    # 37-token chunks never align with 16-token blocks; a 96-token budget mixes chunks and decodes.
    llm = LLM(num_kv_blocks=256, max_model_len=1024, long_prefill_token_threshold=37,
              max_num_batched_tokens=96)
    assert _engine_greedy(llm, _prompts(vocab)) == reference["mixed"]


def test_parity_under_preemption(vocab: int, reference: dict) -> None:
    # 260 blocks x 4 = 1036 tokens, far less than the batch's ~1.9k. Chunked prefill admits every
    # request with a partial allocation; as their prefills grow the pool runs dry, so running
    # requests are preempted (all blocks freed) and recomputed later.
    llm = LLM(num_kv_blocks=260, block_size=4, max_model_len=1024, long_prefill_token_threshold=64)
    assert _engine_greedy(llm, _prompts(vocab)) == reference["mixed"]
    assert llm.engine.scheduler.num_preemptions > 0
    assert llm.engine.scheduler.kv.pool.num_used_blocks == 0


def test_parity_bfloat16(vocab: int) -> None:
    """bf16 tolerance (the KV cache in bfloat16 too, the default for a bfloat16 model): the first
    generated token matches HF for >= 14 of 16 prompts, and on average
    the two greedy sequences agree on >= 50% of their leading tokens (a divergence compounds)."""
    prompts = _prompts(vocab)
    ref = _hf_greedy(prompts, torch.bfloat16)
    llm = LLM(num_kv_blocks=256, max_model_len=1024, dtype="bfloat16")
    assert llm.engine.runner.kv_caches[0][0].dtype == torch.bfloat16  # auto: the model's dtype
    first, agree = _agreement(_engine_greedy(llm, prompts), ref)
    print(f"bf16: first-token matches {first}/16, mean common prefix {agree:.2%}")
    assert first >= 14 and agree >= 0.5


def test_bfloat16_is_float32_math_on_the_bf16_weights(vocab: int, tmp_path) -> None:
    """The stated bf16 reference: a bfloat16 model runs float32 activations (and, asked, a float32 KV
    cache) over its bf16 weights (packed in bf16 panels), so its greedy tokens equal the float32 engine's on a checkpoint
    holding the same bf16-rounded weights in float32; where the build has bfloat16 products
    (AVX512_BF16) the panels are K pairs and each matmul's x is rounded to bfloat16 too, so there the
    tokens agree within the bf16 tolerance of ``test_parity_bfloat16`` instead."""
    import shutil

    from transformers import AutoModelForCausalLM

    source = default_model_dir()
    rounded = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16).float()
    rounded.save_pretrained(tmp_path)
    for name in source.iterdir():
        if name.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(name, tmp_path / name.name)
    prompts = _prompts(vocab)
    bf16 = LLM(num_kv_blocks=256, max_model_len=1024, dtype="bfloat16", kv_cache_dtype="float32")
    runner = bf16.engine.runner
    assert runner.kv_dtype == torch.float32 and runner.kv_caches[0][0].dtype == torch.float32
    assert runner.lean is not None and runner.lean.layers[0].packed["qkv_w"].dtype == torch.bfloat16
    pairs = runner.lean.layers[0].packed["qkv_w"].shape[-1] == 32
    assert pairs == bf16_products()
    got = _engine_greedy(bf16, prompts)
    rounded_weights = _engine_greedy(LLM(model=str(tmp_path), num_kv_blocks=256, max_model_len=1024), prompts)
    if not pairs:
        assert got == rounded_weights
        return
    first, agree = _agreement(got, rounded_weights)
    print(f"bf16 pairs against float32 math on the rounded weights: first {first}/16, mean prefix {agree:.2%}")
    assert first >= 14 and agree >= 0.5


def test_bfloat16_kv_cache_keeps_greedy_close(vocab: int, reference: dict) -> None:
    """``kv_cache_dtype="bfloat16"`` under a float32 model halves the pool's bytes and rounds K and V
    to bf16 (attention in bfloat16 products where the CPU has them, else float32): against the float32
    reference the first token matches for >= 15 of 16 prompts and the greedy sequences agree on >= 75%
    of their leading tokens; an unknown form is a ValueError."""
    llm = LLM(num_kv_blocks=256, max_model_len=1024, kv_cache_dtype="bfloat16")
    assert llm.engine.runner.kv_caches[0][0].dtype == torch.bfloat16
    first, agree = _agreement(_engine_greedy(llm, _prompts(vocab)), reference["mixed"])
    assert first >= 15 and agree >= 0.75, (first, agree)
    assert llm.engine.scheduler.kv.pool.num_used_blocks == 0
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        LLM(num_kv_blocks=64, kv_cache_dtype="float16")


@pytest.mark.gpu
def test_cuda_parity_float32_with_prefix_hits_and_preemption(vocab: int) -> None:
    """On CUDA (the HF model under our paged attention) float32 greedy equals transformers on CUDA:
    mixed lengths, chunks straddling blocks, prefix-cache hits and recompute after preemption; no
    block stays in use."""
    prompts, shared = _prompts(vocab), _shared_prefix_prompts(vocab)
    ref, ref_shared = _hf_greedy(prompts, torch.float32, "cuda"), _hf_greedy(shared, torch.float32, "cuda")
    llm = LLM(device="cuda", num_kv_blocks=256, max_model_len=1024, long_prefill_token_threshold=37,
              max_num_batched_tokens=96)
    assert llm.engine.runner.kv_caches[0][0].is_cuda
    assert _engine_greedy(llm, prompts) == ref
    graphs = llm.engine.runner.graphs
    assert graphs is not None and graphs.steps > 0 and not graphs._failed and graphs.disabled is None  # replayed
    assert _engine_greedy(llm, shared[:1]) == ref_shared[:1]
    assert _engine_greedy(llm, shared) == ref_shared
    assert llm.engine.scheduler.kv.prefix_hit_tokens >= 8 * 144
    small = LLM(device="cuda", num_kv_blocks=260, block_size=4, max_model_len=1024,
                long_prefill_token_threshold=64)
    assert _engine_greedy(small, prompts) == ref
    assert small.engine.scheduler.num_preemptions > 0
    for engine in (llm.engine, small.engine):
        assert engine.scheduler.kv.pool.num_used_blocks == 0


@pytest.mark.gpu
def test_cuda_bfloat16_and_seeded_sampling(vocab: int) -> None:
    """bf16 on CUDA (bf16 weights, KV and attention) keeps the CPU bf16 tolerance against transformers'
    bf16 on CUDA; seeded sampling on CUDA repeats itself and differs across seeds."""
    prompts = _prompts(vocab)
    llm = LLM(device="cuda", num_kv_blocks=256, max_model_len=1024, dtype="bfloat16")
    assert llm.engine.runner.kv_caches[0][0].dtype == torch.bfloat16
    first, agree = _agreement(_engine_greedy(llm, prompts), _hf_greedy(prompts, torch.bfloat16, "cuda"))
    print(f"cuda bf16: first-token matches {first}/16, mean common prefix {agree:.2%}")
    assert first >= 14 and agree >= 0.5

    def sampled(seed: int) -> list[list[int]]:
        sp = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=NEW_TOKENS, seed=seed, ignore_eos=True)
        return [o.outputs[0].token_ids for o in llm.generate([{"prompt_token_ids": p} for p in prompts[:6]],
                                                               sp, use_tqdm=False)]

    assert sampled(7) == sampled(7) != sampled(8)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_graph_decodes_equal_eager_decodes(vocab: int, dtype: str) -> None:
    """Decode steps replayed from CUDA graphs (captured ahead, and on first use) give the eager engine's
    greedy tokens: float32 exactly; bf16 on the first token of every prompt and >= 90% of the leading
    tokens (padding rows change the row counts cuBLAS sees, and with them the kernels it picks)."""
    prompts = _prompts(vocab)
    eager = LLM(device="cuda", num_kv_blocks=256, max_model_len=1024, dtype=dtype, cuda_graphs=False)
    assert eager.engine.runner.graphs is None
    expected = _engine_greedy(eager, prompts)
    del eager
    llm = LLM(device="cuda", num_kv_blocks=256, max_model_len=1024, dtype=dtype)
    graphs = llm.engine.runner.graphs
    assert graphs is not None and graphs.warm_up(4, 16) > 0
    replayed = _engine_greedy(llm, prompts)
    if dtype == "float32":
        assert replayed == expected
    else:
        first, agree = _agreement(replayed, expected)
        assert first == len(prompts) and agree >= 0.9, (first, agree)
    assert graphs.steps > 0 and not graphs._failed and graphs.disabled is None
    assert llm.engine.scheduler.kv.pool.num_used_blocks == 0
