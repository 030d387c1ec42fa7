"""A random-weight checkpoint with the layer shape of a model the simulator knows (``specs.MODELS``).

With no model hub, this is how the engine is timed at GPU scale: ``agent-engine make-model DIR --like
llama-3.1-8b --dtype bfloat16 --device cuda`` writes an ordinary HF Llama folder whose decoder layers
(hidden size, heads, KV heads, head size, MLP width, layer count) are the named model's, filled with
seeded random weights made on ``device``, beside the embedded model's tokenizer.

Invariant: the vocabulary is the embedded tokenizer's (every id the engine emits decodes), so the
embedding and LM head are smaller than the named model's; ``vocab_note`` says by how much. Every
other weight has the named model's shape.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent_engine.json_types import JsonObject
from agent_engine.sim.specs import ModelSpec

__all__ = ["build_shaped_model", "shaped_config", "vocab_note"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
_DTYPES = ("float32", "bfloat16")


def shaped_config(spec: ModelSpec, dtype: str) -> JsonObject:
    """The HF ``config.json`` of the embedded model with ``spec``'s decoder-layer shape."""
    from agent_engine.model.default_model import model_config_dict

    config = model_config_dict()
    config.update({
        "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers, "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
        "max_position_embeddings": min(spec.max_position_embeddings, 32768), "torch_dtype": dtype,
        "initializer_range": 0.02,
    })
    return config


def vocab_note(spec: ModelSpec, config: JsonObject) -> str:
    """How much smaller the checkpoint's embedding and LM head are than ``spec``'s."""
    return (f"vocabulary {config['vocab_size']} (the embedded tokenizer's) instead of {spec.vocab_size}: "
            f"{(spec.vocab_size - config['vocab_size']) * spec.hidden_size * 2 / 1e6:.0f}M fewer embedding "
            f"and LM-head weights; every decoder layer is {spec.name}'s")


def build_shaped_model(out_dir: Path, spec: ModelSpec, dtype: str = "bfloat16", device: str = "cpu",
                       seed: int = 0) -> Path:
    """Write the checkpoint into ``out_dir`` and return it. Weights: N(0, 0.02) for matrices, ones for
    norms, drawn on ``device`` from one seeded generator in sorted-name order."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from agent_engine.model.default_model import default_model_dir

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = shaped_config(spec, dtype)
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in config.items()
                                                   if k not in ("architectures", "model_type")}))
    torch_dtype = getattr(torch, dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    state = {}
    for name, param in sorted(skeleton.named_parameters()):
        if name.endswith("norm.weight"):
            state[name] = torch.ones(param.shape, dtype=torch_dtype)
        else:
            weight = torch.empty(param.shape, dtype=torch_dtype, device=device).normal_(0.0, 0.02, generator=gen)
            state[name] = weight.cpu()
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    source = default_model_dir()
    for name in _TOKENIZER_FILES:
        shutil.copy(source / name, out_dir / name)
    return out_dir
