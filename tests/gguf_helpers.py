"""Tiny GGUF files for tests: a 2-layer Llama written the way llama.cpp writes one, and broken files.

``write_tiny_llama_gguf`` writes float32 tensors (so a conversion must give back the exact weights),
or, with ``quant``, some matmul weights in GGUF quantized types; the embedded default model's
byte-level BPE vocabulary as a ``gpt2`` tokenizer, and ``CHAT_TEMPLATE``. It returns the Hugging Face
state dict the file encodes (before any quantization). A ``llama`` file (and any other architecture
name but ``qwen2``) stores Q and K rows permuted as llama.cpp does; a ``qwen2`` file is a Qwen2 model
(Q, K and V biases) in Hugging Face row order. ``set_tensor_offset`` tampers with a written file's
tensor table in place (an attacker's copy).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from agent_engine.model.default_model import default_model_dir

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
N_HEAD, N_KV_HEAD, HIDDEN, LAYERS, FFN, CONTEXT = 4, 2, 64, 2, 128, 256
EOS_ID = 2  # <|im_end|> in the default model's vocabulary

_LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order (transformers' GGUF reader undoes it)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tiny_llama_state_dict(vocab: int, arch: str = "llama") -> dict[str, torch.Tensor]:
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config_cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    cfg = config_cls(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                     num_attention_heads=N_HEAD, num_key_value_heads=N_KV_HEAD, max_position_embeddings=CONTEXT,
                     tie_word_embeddings=False, rms_norm_eps=1e-5)
    model = model_cls(cfg)
    with torch.no_grad():  # norms at 1.0 (biases at 0) would hide one mapped to the wrong tensor
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.uniform_(-0.5, 0.5)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _gguf_tensors(sd: dict[str, torch.Tensor], arch: str) -> dict[str, np.ndarray]:
    out = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"],
           "output.weight": sd["lm_head.weight"]}
    for i in range(LAYERS):
        for hf, gg in _LAYER_NAMES.items():
            out[f"blk.{i}.{gg}.weight"] = sd[f"model.layers.{i}.{hf}.weight"]
            bias = sd.get(f"model.layers.{i}.{hf}.bias")
            if bias is not None:
                out[f"blk.{i}.{gg}.bias"] = bias
    arrays = {k: v.numpy().astype(np.float32) for k, v in out.items()}
    if arch != "qwen2":
        for i in range(LAYERS):
            arrays[f"blk.{i}.attn_q.weight"] = _permute(arrays[f"blk.{i}.attn_q.weight"], N_HEAD)
            arrays[f"blk.{i}.attn_k.weight"] = _permute(arrays[f"blk.{i}.attn_k.weight"], N_KV_HEAD)
    return arrays


def _vocab() -> tuple[list[str], list[int], list[str]]:
    tok = json.loads((default_model_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    special = {t["content"] for t in tok["added_tokens"] if t.get("special")}
    types = [3 if t in special else 1 for t in tokens]  # 3: control, 1: normal
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, types, merges


def write_tiny_llama_gguf(path: Path, arch: str = "llama", quant: dict[str, int] | None = None) -> dict[str, torch.Tensor]:
    """Write a tiny GGUF of architecture ``arch``; return the HF state dict it holds. ``quant`` maps a
    tensor-name part (``attn_q``, ``output``, ``token_embd``) to the GGML type its weight matrices are
    stored in (gguf-py's quantizers: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; BF16); the rest is float32."""
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    tokens, types, merges = _vocab()
    sd = tiny_llama_state_dict(len(tokens), arch)
    w = GGUFWriter(str(path), arch)
    w.add_name("tiny test llama")
    w.add_block_count(LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(HIDDEN // N_HEAD)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(EOS_ID)
    w.add_chat_template(CHAT_TEMPLATE)
    for name, arr in _gguf_tensors(sd, arch).items():
        qtype = (quant or {}).get(name.split(".")[-2]) if arr.ndim == 2 else None
        if qtype is None:
            w.add_tensor(name, arr)
        else:
            kind = GGMLQuantizationType(qtype)
            w.add_tensor(name, quantize(arr, kind), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sd


def truncate(path: Path, keep_fraction: float = 0.5) -> None:
    """Cut ``path`` to a fraction of its size (a download that stopped half-way)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])


def set_tensor_offset(path: Path, name: str, offset: int | str) -> None:
    """Rewrite, in place, the data offset (relative to the data section) the tensor table gives ``name``:
    ``offset`` as a number, or the name of another tensor to point it at that tensor's bytes."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path), "r+")
    tensors = {t.name: t for t in reader.tensors}
    value = int(tensors[offset].field.parts[-1][0]) if isinstance(offset, str) else offset
    tensors[name].field.parts[-1][0] = value
    tensors[name].field.parts[-1].flush()
    del reader
