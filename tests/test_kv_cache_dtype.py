"""The KV cache's dtype per model and request (``LeanDecoder.kv_cache_dtype``, ``--kv-cache-dtype``):
``auto`` is the model's dtype wherever the cache can hold it, ``float32`` needs float32 activations,
``bfloat16`` the lean CPU decoder with the C++ kernels; anything else is a ValueError."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agent_engine.model.lean_decoder import LeanDecoder
from kernels.cpp_build import load_cpu_ops

pytestmark = pytest.mark.core

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=64)


def _model(dtype: torch.dtype) -> torch.nn.Module:
    return LlamaForCausalLM(LlamaConfig(**TINY)).to(dtype).eval()


@pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")
def test_with_the_cpp_kernels_each_model_gets_its_cache() -> None:
    """A float32 model: float32 by default, bfloat16 on request; a bfloat16 one (float32 activations
    over its bf16 weights): bfloat16 by default, as vLLM's auto, float32 on request."""
    f32, bf16 = _model(torch.float32), _model(torch.bfloat16)
    assert LeanDecoder.kv_cache_dtype(f32) == torch.float32
    assert LeanDecoder.kv_cache_dtype(f32, "float32") == torch.float32
    assert LeanDecoder.kv_cache_dtype(f32, "bfloat16") == torch.bfloat16
    assert LeanDecoder.activation_dtype(bf16) == torch.float32
    assert LeanDecoder.kv_cache_dtype(bf16) == torch.bfloat16
    assert LeanDecoder.kv_cache_dtype(bf16, "float32") == torch.float32
    assert LeanDecoder.kv_cache_dtype(bf16, "bfloat16") == torch.bfloat16


def test_half_precision_activations_keep_their_own_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the activations are half precision (a float16 model; a bfloat16 one without the C++
    kernels) auto is their dtype, and a float32 or (under float16) bfloat16 cache is a ValueError."""
    f16 = _model(torch.float16)
    assert LeanDecoder.kv_cache_dtype(f16) == torch.float16
    for asked in ("float32", "bfloat16"):
        with pytest.raises(ValueError, match="KV cache needs"):
            LeanDecoder.kv_cache_dtype(f16, asked)
    monkeypatch.setattr("agent_engine.model.lean_decoder.use_cpp", lambda device: False)
    bf16 = _model(torch.bfloat16)
    assert LeanDecoder.kv_cache_dtype(bf16) == torch.bfloat16
    with pytest.raises(ValueError, match="float32 KV cache needs float32 activations"):
        LeanDecoder.kv_cache_dtype(bf16, "float32")


def test_an_unknown_form_is_refused() -> None:
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of"):
        LeanDecoder.kv_cache_dtype(_model(torch.float32), "float16")
