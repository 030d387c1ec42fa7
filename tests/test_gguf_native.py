"""A quantized GGUF served on its native blocks (``--gguf-weights native``, the default): every matmul
whose type has a kernel runs on the file's blocks (llama's permuted Q and K rows matched to the loaded
weights), a type without one stays float32, and greedy tokens equal the dequantized float32 engine's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf_helpers import LAYERS, write_tiny_llama_gguf

from agent_engine import LLM, SamplingParams
from kernels.cpp_build import load_cpu_ops

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]

Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16 = 2, 3, 6, 7, 8, 30
TYPES = {"attn_q": Q8_0, "attn_k": Q4_0, "attn_v": Q5_0, "attn_output": Q4_1, "ffn_gate": Q5_1, "ffn_up": Q5_1,
         "ffn_down": Q4_0, "output": Q8_0}
PROMPTS = [[5, 17, 42, 99, 7, 3, 250, 12], [300, 301, 302, 8, 9, 10, 11]]  # 15 prefill rows: the float32 path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENT_ENGINE_CACHE", str(root))
        yield root


def _llm(path: Path, weights: str) -> LLM:
    return LLM(model=str(path), gguf_weights=weights, num_kv_blocks=32, max_model_len=128)


def _greedy(llm: LLM) -> list[list[int]]:
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate([{"prompt_token_ids": p} for p in PROMPTS], sp,
                                                         use_tqdm=False)]


def test_native_weights_give_the_dequantized_models_greedy_tokens(cache: Path) -> None:
    path = cache / "tiny-q.gguf"
    write_tiny_llama_gguf(path, quant=TYPES)
    native, plain = _llm(path, "native"), _llm(path, "float32")
    lean = native.engine.runner.lean
    assert all(set(layer.quant) == {"qkv_w", "o_w", "gate_up_w", "down_w"} for layer in lean.layers)
    assert [p.type_name for p in lean.layers[0].quant["qkv_w"].parts] == ["Q8_0", "Q4_0", "Q5_0"]
    assert lean.head_quant is not None
    assert all(not layer.quant for layer in plain.engine.runner.lean.layers)
    assert _greedy(native) == _greedy(plain)
    assert native.engine.scheduler.kv.pool.num_used_blocks == 0


def test_a_type_without_a_kernel_stays_float32(cache: Path) -> None:
    path = cache / "tiny-bf16-down.gguf"
    write_tiny_llama_gguf(path, quant={**TYPES, "ffn_down": BF16})
    llm = _llm(path, "native")
    layers = llm.engine.runner.lean.layers
    assert len(layers) == LAYERS
    assert all("down_w" not in layer.quant and "qkv_w" in layer.quant for layer in layers)
    assert _greedy(llm) == _greedy(_llm(path, "float32"))


def test_gguf_weights_must_be_native_or_float32() -> None:
    with pytest.raises(ValueError, match="gguf_weights"):
        LLM(gguf_weights="int4")


def test_the_tensor_table_of_a_cut_file_is_a_value_error(cache: Path) -> None:
    from gguf_helpers import truncate

    from agent_engine.model.gguf_weights import read_tensor_table

    path = cache / "tiny-cut.gguf"
    write_tiny_llama_gguf(path, quant=TYPES)
    table = read_tensor_table(path)
    assert table["blk.0.attn_q.weight"].tensor_type == Q8_0 and table["blk.0.attn_q.weight"].data.shape[0] == 64
    truncate(path, 0.001)
    with pytest.raises(ValueError, match="tensor table"):
        read_tensor_table(path)
