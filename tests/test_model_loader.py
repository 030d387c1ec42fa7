"""model_loader: the default model, tiny Qwen2 / Mistral folders written here, and bad-input errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from agent_engine.model.default_model import DEFAULT_MODEL_NAME, default_model_dir
from agent_engine.model.loader import LoadedModel, load_model

pytestmark = pytest.mark.core

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def default_loaded() -> LoadedModel:
    return load_model(None)


def _write_tiny(folder: Path, arch: str) -> Path:
    from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(
        vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, eos_token_id=2, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    if arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = MistralForCausalLM(MistralConfig(**common, sliding_window=None))
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(default_model_dir() / name, folder / name)
    return folder


def test_load_default(default_loaded: LoadedModel) -> None:
    lm = default_loaded
    assert lm.name == DEFAULT_MODEL_NAME
    assert lm.model_dir == default_model_dir()
    assert lm.eos_token_ids == [2, 0]
    assert lm.max_position_embeddings == 4096 and lm.vocab_size == 4096
    assert not lm.model.training and lm.model.dtype == torch.float32
    assert lm.model.config._attn_implementation == "sdpa"
    ids = lm.tokenizer("hello world", return_tensors="pt").input_ids
    with torch.no_grad():
        assert lm.model(ids).logits.shape == (1, ids.shape[1], 4096)


def test_load_default_by_path_bfloat16() -> None:
    lm = load_model(default_model_dir(), dtype="bfloat16")
    assert lm.model.dtype == torch.bfloat16
    assert lm.name == DEFAULT_MODEL_NAME


@pytest.mark.parametrize("arch", ["qwen2", "mistral"])
def test_load_tiny_architectures(tmp_path: Path, arch: str) -> None:
    folder = _write_tiny(tmp_path / f"tiny-{arch}", arch)
    lm = load_model(str(folder), dtype="auto")
    assert lm.name == f"tiny-{arch}"
    assert lm.model.config.model_type == arch
    assert lm.model.dtype == torch.float32
    assert 2 in lm.eos_token_ids
    assert lm.vocab_size == 4096 and lm.max_position_embeddings == 512
    ids = lm.tokenizer("def f(x): return x", return_tensors="pt").input_ids
    with torch.no_grad():
        out = lm.model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert out.shape[1] <= ids.shape[1] + 4


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found"):
        load_model(tmp_path / "nope")


def test_missing_config(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="config.json"):
        load_model(tmp_path)


def test_missing_weights_and_tokenizer(tmp_path: Path) -> None:
    src = default_model_dir()
    shutil.copy(src / "config.json", tmp_path / "config.json")
    with pytest.raises(ValueError, match="weights"):
        load_model(tmp_path)
    (tmp_path / "model.safetensors").symlink_to(src / "model.safetensors")
    with pytest.raises(ValueError, match="tokenizer"):
        load_model(tmp_path)


def test_unsupported_dtype() -> None:
    with pytest.raises(ValueError, match="dtype"):
        load_model(default_model_dir(), dtype="int8")


def test_unsupported_architecture(tmp_path: Path) -> None:
    src = default_model_dir()
    for name in (*TOKENIZER_FILES, "model.safetensors"):
        (tmp_path / name).symlink_to(src / name)
    (tmp_path / "config.json").write_text('{"model_type": "no-such-arch", "architectures": ["NoSuch"]}')
    with pytest.raises(ValueError):
        load_model(tmp_path)


def test_hub_id_is_not_downloaded() -> None:
    with pytest.raises(ValueError, match=r"not found.*known names.*smollm2"):
        load_model("HuggingFaceTB/SmolLM2-135M-Instruct")


def test_plain_file_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match="is a file"):
        load_model(path)
