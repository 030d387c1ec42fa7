"""SmolLM2-135M-Instruct (``--model smollm2``): with ``--gguf-weights float32`` the paged engine's
greedy tokens equal transformers' ``generate`` on the same converted float32 weights, for
chat-templated prompts, and the chat template and eos of the GGUF are what the engine serves with.
Served natively (the default: the file's blocks; int8-rounded activations on narrow steps, the exact
dequantized weights on wide ones) its logits on the int8 route everywhere (the larger rounding of the
two, which a generation mixes step by step and matmul by matmul) stay within ``NATIVE_TOL`` of the
float32 engine's, and its greedy tokens equal them up to the first step whose float32 top-2 margin is
under twice that step's int8 logit difference (the first chat's first answer token is such a step:
"The" leads "L" by 0.09).
"""

from __future__ import annotations

import time

import pytest
import torch
from model_fixtures import SMOLLM2_NAME, smollm2_dir

from agent_engine import LLM, SamplingParams
from kernels import quant_routes

pytestmark = pytest.mark.slow

NEW_TOKENS = 16
NATIVE_TOL = 0.1  # of the largest |logit| (measured: up to 8% on the chat prompts, 30 layers of int8 rounding)
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a terse coding assistant."},
     {"role": "user", "content": "Write a Python function that reverses a string."}],
]


@pytest.fixture(scope="module")
def llm() -> LLM:
    smollm2_dir()  # skips without network and no cached copy
    return LLM(model="smollm2", gguf_weights="float32", num_kv_blocks=128, max_model_len=1024)


@pytest.fixture(scope="module")
def native() -> LLM:
    smollm2_dir()
    return LLM(model="smollm2", num_kv_blocks=128, max_model_len=1024)


@pytest.fixture(scope="module")
def prompts(llm: LLM) -> list[list[int]]:
    tok = llm.get_tokenizer()
    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in CHATS]
    for text in texts:  # the GGUF's ChatML template, not a fallback
        assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    return [tok(t, add_special_tokens=False).input_ids for t in texts]


def _hf_greedy(prompts: list[list[int]]) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    gen_cfg = model.generation_config
    gen_cfg.eos_token_id = None  # our side runs with ignore_eos, so neither may stop early
    out = []
    with torch.inference_mode():
        for p in prompts:
            ids = torch.tensor([p])
            g = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen_cfg,
                               max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=2)
            out.append(g[0, len(p):].tolist())
    return out


def test_served_name_and_eos(llm: LLM) -> None:
    assert llm.engine.model_name == SMOLLM2_NAME
    tok = llm.get_tokenizer()
    assert tok.convert_ids_to_tokens(2) == "<|im_end|>" and tok.convert_tokens_to_ids("<|im_start|>") == 1
    assert tok.eos_token == "<|im_end|>"


def test_greedy_parity_with_transformers(llm: LLM, prompts: list[list[int]]) -> None:
    sp = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True)
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    dt = time.perf_counter() - t0
    got = [o.outputs[0].token_ids for o in outs]
    print(f"smollm2: {len(prompts) * NEW_TOKENS} tokens in {dt:.2f} s ({len(prompts) * NEW_TOKENS / dt:.1f} tok/s)")
    assert got == _hf_greedy(prompts)
    assert llm.engine.scheduler.kv.pool.num_used_blocks == 0


def test_chat_answer_stops_at_im_end(llm: LLM, prompts: list[list[int]]) -> None:
    out = llm.generate({"prompt_token_ids": prompts[0]}, SamplingParams(temperature=0, max_tokens=48),
                       use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and out.token_ids[-1] == 2
    assert "Paris" in out.text and "<|im_end|>" not in out.text


def test_native_weights_within_the_int8_rounding(llm: LLM, native: LLM, prompts: list[list[int]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert native.engine.loaded.quantized is not None and llm.engine.loaded.quantized is None
    sp = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, ignore_eos=True)
    expected = [o.outputs[0].token_ids for o in llm.generate([{"prompt_token_ids": p} for p in prompts], sp,
                                                             use_tqdm=False)]
    got = [o.outputs[0].token_ids for o in native.generate([{"prompt_token_ids": p} for p in prompts], sp,
                                                           use_tqdm=False)]
    compared = 0
    for prompt, continuation, tokens in zip(prompts, expected, got, strict=True):
        seq = prompt + list(continuation)
        blocks = [list(range(1, -(-len(seq) // 16) + 1))]
        ref = llm.engine.runner._forward(seq, [len(seq)], [0], blocks, list(range(len(seq)))).clone()
        with monkeypatch.context() as m:
            m.setattr(quant_routes._routes, "known", {})  # every matmul on the int8 route
            out = native.engine.runner._forward(seq, [len(seq)], [0], blocks, list(range(len(seq)))).clone()
        diff = float((out - ref).abs().max())
        assert diff <= NATIVE_TOL * float(ref.abs().max())
        top2 = ref[len(prompt) - 1 : -1].topk(2, dim=-1).values
        row_diff = (out - ref).abs().max(dim=-1).values[len(prompt) - 1 : -1]
        clear = ((top2[:, 0] - top2[:, 1]) > 2 * row_diff).tolist() + [False]
        n = clear.index(False)
        assert list(tokens[:n]) == list(continuation[:n])
        compared += n
    print(f"smollm2 native: {compared} greedy tokens compared with a clear margin")
