"""ModelRunner on tiny random HF models == the models' own full forward."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from agent_engine.model.runner import ModelRunner
from scheduler.sampling_params import SamplingParams
from scheduler.step_io import ScheduledRequest, SchedulerOutput

pytestmark = pytest.mark.core

BLOCK = 4
GREEDY = SamplingParams(temperature=0.0, max_tokens=64, logprobs=5)
TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _tiny(kind: str = "llama") -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**TINY, attn_implementation="sdpa"))
    elif kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**TINY, attn_implementation="sdpa"))
    else:
        model = MistralForCausalLM(MistralConfig(**TINY, sliding_window=64, attn_implementation="sdpa"))
    return model.float().eval()


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return _tiny("llama")


def _hf_last_logits(model: torch.nn.Module, tokens: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([tokens])).logits[0, -1].float()


class Seq:
    """Hand-made request bookkeeping: its tokens, computed count and block table."""

    def __init__(self, rid: str, prompt: list[int], blocks: list[int]) -> None:
        self.rid, self.tokens, self.blocks, self.computed = rid, list(prompt), blocks, 0

    def chunk(self, n: int) -> ScheduledRequest:
        start = self.computed
        ids = self.tokens[start : start + n]
        do_sample = start + len(ids) == len(self.tokens)
        return ScheduledRequest(self.rid, ids, start, list(self.blocks), GREEDY, do_sample)

    def advance(self, sched: ScheduledRequest, out_tokens: dict[str, int]) -> None:
        self.computed += len(sched.token_ids)
        if sched.do_sample:
            self.tokens.append(out_tokens[self.rid])


def _step(runner: ModelRunner, seqs_chunks: list[tuple[Seq, int]]) -> tuple[dict[str, int], torch.Tensor]:
    sched = [s.chunk(n) for s, n in seqs_chunks]
    out = runner.execute(SchedulerOutput(scheduled=sched))
    for (s, _), sr in zip(seqs_chunks, sched, strict=True):
        s.advance(sr, out.sampled_token_ids)
    assert runner.last_logits is not None
    return out.sampled_token_ids, runner.last_logits.clone()  # the next step may rewrite its buffer


def _check_chunked_then_decode(model: torch.nn.Module) -> None:
    hf = copy.deepcopy(model)
    runner = ModelRunner(model, num_kv_blocks=16, block_size=BLOCK)
    prompt = torch.randint(0, 128, (23,), generator=torch.Generator().manual_seed(1)).tolist()
    seq = Seq("a", prompt, blocks=[9, 2, 14, 5, 11, 3, 8, 1])  # non-contiguous table
    for n in (5, 7):  # chunk boundaries 5 and 12: not block aligned, no sampling
        toks, _ = _step(runner, [(seq, n)])
        assert toks == {}
    for _ in range(7):  # last prompt chunk (11 tokens) samples; then 6 single-token decodes
        expected = _hf_last_logits(hf, seq.tokens)
        before = len(seq.tokens)
        out = runner.execute(SchedulerOutput(scheduled=[sched := seq.chunk(len(seq.tokens) - seq.computed)]))
        seq.advance(sched, out.sampled_token_ids)
        assert runner.last_logits is not None
        torch.testing.assert_close(runner.last_logits[0], expected, rtol=1e-4, atol=1e-4)
        assert seq.tokens[before] == int(expected.argmax())
        lsm = torch.log_softmax(expected, -1)
        assert abs(out.logprobs["a"] - lsm[seq.tokens[before]].item()) < 1e-4
        assert [t for t, _ in out.top_logprobs["a"]] == lsm.topk(5).indices.tolist()


def test_chunked_prefill_then_decode_matches_hf_llama(llama: torch.nn.Module) -> None:
    _check_chunked_then_decode(copy.deepcopy(llama))


@pytest.mark.parametrize("kind", ["qwen2", "mistral"])  # qwen2: qkv bias; mistral: sliding-window config
def test_chunked_prefill_then_decode_matches_hf_other_families(kind: str) -> None:
    _check_chunked_then_decode(_tiny(kind))


def test_mixed_batch_equals_requests_alone(llama: torch.nn.Module) -> None:
    hf = copy.deepcopy(llama)
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 128, (n,), generator=gen).tolist() for n in (14, 6, 9)]
    tables = [[3, 7, 1, 12], [5, 2, 10], [4, 15, 6, 9]]

    def run(batched: bool) -> list[torch.Tensor]:
        runner = ModelRunner(copy.deepcopy(llama), num_kv_blocks=16, block_size=BLOCK)
        a, b, c = (Seq(r, p, t) for r, p, t in zip("abc", prompts, tables, strict=True))
        _step(runner, [(a, 6), (b, 6), (c, 9)])  # a: first chunk; b, c: whole prompt, sample
        if batched:
            _, logits = _step(runner, [(a, 8), (b, 1), (c, 1)])  # a: rest of prompt; b, c: decode
            return [logits[i] for i in range(3)]
        return [_step(runner, [(s, n)])[1][0] for s, n in ((a, 8), (b, 1), (c, 1))]

    batched, alone = run(True), run(False)
    for x, y in zip(batched, alone, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    # And the decode steps saw exactly the HF continuation.
    first_b = int(_hf_last_logits(hf, prompts[1]).argmax())
    torch.testing.assert_close(batched[1], _hf_last_logits(hf, prompts[1] + [first_b]), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(batched[0], _hf_last_logits(hf, prompts[0]), rtol=1e-4, atol=1e-4)


def test_prefix_blocks_shared_across_requests(llama: torch.nn.Module) -> None:
    """B reuses A's two full blocks (a prefix-cache hit) and computes only its own tail."""
    hf = copy.deepcopy(llama)
    runner = ModelRunner(copy.deepcopy(llama), num_kv_blocks=16, block_size=BLOCK)
    gen = torch.Generator().manual_seed(3)
    shared = torch.randint(0, 128, (8,), generator=gen).tolist()
    a = Seq("a", shared + [1, 2, 3], [6, 2, 9])
    _step(runner, [(a, 11)])
    b = Seq("b", shared + [4, 5, 6, 7, 8], [6, 2, 13, 4])
    b.computed = 8  # prefix hit: A's blocks 6 and 2
    c = Seq("c", shared[:4] + [9, 9], [6, 11])  # hit on one block, computed in the same step as b
    c.computed = 4
    _, logits = _step(runner, [(b, 5), (c, 2)])
    torch.testing.assert_close(logits[0], _hf_last_logits(hf, b.tokens[:13]), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(logits[1], _hf_last_logits(hf, c.tokens[:6]), rtol=1e-4, atol=1e-4)


def test_finished_ids_drop_sampler_state_and_helpers(llama: torch.nn.Module) -> None:
    runner = ModelRunner(copy.deepcopy(llama), num_kv_blocks=16, block_size=BLOCK)
    sp = SamplingParams(temperature=1.0, seed=5)
    req = ScheduledRequest("s", [1, 2, 3], 0, [1], sp, True)
    out = runner.execute(SchedulerOutput(scheduled=[req]))
    assert set(out.sampled_token_ids) == {"s"} and "s" in runner.sampler._req_generators
    runner.execute(SchedulerOutput(finished_req_ids={"s"}))
    assert not runner.sampler._req_generators
    per_block = ModelRunner.kv_cache_bytes_per_block(llama.config, BLOCK, torch.float32)
    assert per_block == 2 * 2 * BLOCK * 2 * 16 * 4
    times = runner.profile_prefill([4, 20])
    assert len(times) == 2 and all(t > 0 for t in times)
    assert not runner.workspace._buffers  # the profile's larger step leaves no buffer resident
    with pytest.raises(ValueError):
        runner.profile_prefill([16 * BLOCK])


@pytest.mark.parametrize("path", ["hf_modules", "torch_ops", "unpacked"])
def test_lean_decoder_equals_other_paths(llama: torch.nn.Module, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean decoder (fused projections, C++ ops and panel-packed weights when built) == the HF
    modules with our attention, == the lean decoder on the torch fallback ops, and == the lean decoder
    on its plain weights; chunked prefill, a prefix hit and decodes alike."""
    import importlib

    paged = importlib.import_module("kernels.paged_attention")  # the module, not the function of that name
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(0, 128, (n,), generator=gen).tolist() for n in (19, 7)]

    def run(variant: str) -> list[torch.Tensor]:
        monkeypatch.setenv("AGENT_ENGINE_PREPACK", "0" if variant == "unpacked" else "1")
        runner = ModelRunner(copy.deepcopy(llama), num_kv_blocks=16, block_size=BLOCK)
        assert runner.lean is not None  # Llama on CPU takes the lean path by default
        packed = bool(runner.lean.layers[0].packed) and runner.lean.head_copies.packed is not None
        assert packed == (runner.lean.cpp and variant != "unpacked")
        if variant == "hf_modules":
            runner.lean = None
        elif variant == "torch_ops":
            runner.lean.cpp = False
            monkeypatch.setattr(paged, "use_cpp", lambda _device: False)
        a, b = Seq("a", prompts[0], [3, 7, 1, 12, 9, 2]), Seq("b", prompts[1], [5, 4, 10])
        logits = [_step(runner, [(a, 10), (b, 7)])[1][0]]
        logits.append(_step(runner, [(a, 9), (b, 1)])[1])
        for _ in range(3):
            logits.append(_step(runner, [(a, 1), (b, 1)])[1])
        monkeypatch.undo()
        return logits

    lean, other = run("lean"), run(path)
    for x, y in zip(lean, other, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


def test_profile_steps_times_each_width_in_prompts_of_one_length(llama: torch.nn.Module) -> None:
    """A step of each width is ``width / seq_tokens`` fresh prompts; a width that is no multiple of the
    prompt length or does not fit the pool is refused before anything runs."""
    runner = ModelRunner(copy.deepcopy(llama), num_kv_blocks=9, block_size=BLOCK)  # 8 blocks
    times = runner.profile_steps([BLOCK, 2 * BLOCK, 4 * BLOCK], BLOCK)
    assert len(times) == 3 and all(t > 0 for t in times)
    assert not runner.workspace._buffers
    with pytest.raises(ValueError, match="cannot profile"):
        runner.profile_steps([BLOCK + 1], BLOCK)
    with pytest.raises(ValueError, match="cannot profile"):
        runner.profile_steps([16 * BLOCK], BLOCK)
