"""A GGUF model served from one copy of its weights: the file's own quantized blocks.

:func:`load_native` builds the Hugging Face model on the ``meta`` device from the cached metadata
folder (``gguf.cached_metadata``: config, tokenizer, generation config) only for its config and
structure, makes real on the CPU what the lean decoder reads from it (the rotary embedding; norms and
biases, float32 from the file's F32 tensors), and reads every matmul and the token embedding as
quantized blocks of the file (``gguf_weights``). The ``LeanDecoder`` runs it; nothing else can (no
transformers forward is possible on meta weights).

Invariants:
- No float32 copy of a matmul or embedding weight exists, in memory or on disk: only the metadata
  folder is written.
- Every parameter of the returned model that is not on ``meta`` is a float32 CPU tensor read from the
  file; every ``meta`` one is served by the returned ``QuantizedWeights``.
- Where the file cannot be served this way, :func:`load_native` returns None after one log line that
  says why (a device other than the CPU, the C++ kernels off, a dtype other than float32, an
  architecture or layout the lean decoder does not run, a tensor whose type has no kernel): the caller
  serves the converted float32 folder instead. A corrupt file is a ``ValueError``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from agent_engine.model.gguf import cached_metadata
from agent_engine.model.gguf_tensors import read_tensor_table
from agent_engine.model.gguf_weights import (
    NotNative,
    check_native,
    check_types,
    float_tensor,
    quantized_weights,
)
from agent_engine.model.lean_decoder import QuantizedWeights, unsupported_reason
from agent_engine.model.sources import GGUFModel, gguf_model
from kernels.cpu_ops import use_cpp
from kernels.huge_pages import huge_pages_available

logger = logging.getLogger(__name__)

NATIVE_ARCHITECTURES = ("llama", "qwen2")  # GGUF architectures whose tensor layout gguf_weights reads
NATIVE_DTYPES = ("float32", "auto")  # activations are float32


@dataclass
class NativeModel:
    """A GGUF model as :func:`load_native` builds it: ``model`` (meta matmul weights), its
    ``quantized`` weights, and ``metadata_dir`` (config, tokenizer, generation config)."""

    model: torch.nn.Module
    quantized: QuantizedWeights
    metadata_dir: Path


def load_native(gguf: GGUFModel, dtype: str, device: str, huge_pages: bool = True) -> NativeModel | None:
    """The model ``gguf`` names served from its file's blocks, or None (one log line says why; see
    above); with ``huge_pages`` the blocks are copied once into memory advised for huge pages where this
    system offers them (``gguf_weights.quantized_weights``, one tensor at a time; the load log says
    whether the advice was taken), else every matmul reads the file mapping."""
    reason = _setup_reason(dtype, device)
    if reason is not None:
        return _fallback(gguf, reason)
    path = gguf.locate()
    table = read_tensor_table(path)
    if table.architecture not in NATIVE_ARCHITECTURES:
        return _fallback(gguf, f"architecture {table.architecture!r} (native: {', '.join(NATIVE_ARCHITECTURES)})")
    try:
        check_types(table)
        metadata_dir = cached_metadata(gguf.key, gguf.served_name, lambda: path)
        model = meta_model(metadata_dir)
        reason = unsupported_reason(model)
        params = {name: tuple(p.shape) for name, p in model.named_parameters()}
        if reason is None:
            check_native(table, params)
    except NotNative as exc:
        reason = str(exc)
    if reason is not None:
        return _fallback(gguf, reason)
    config = model.config
    heads = (int(config.num_attention_heads), int(getattr(config, "num_key_value_heads", None)
                                                  or config.num_attention_heads))
    for name in params:
        if len(params[name]) == 1:  # norms and biases: real float32 tensors
            _set_parameter(model, name, float_tensor(table, name, heads))
    decoder = model.get_decoder()
    decoder.rotary_emb = type(decoder.rotary_emb)(config=config)
    placed = huge_pages and huge_pages_available()
    quantized = quantized_weights(table, int(config.num_hidden_layers), heads, huge_pages=placed)
    logger.info("serving %s from its GGUF blocks: %.0f MB of quantized weights (%s), no float32 copy", path,
                quantized.nbytes / 2**20, _placement(placed, quantized.in_huge_pages))
    return NativeModel(model.eval(), quantized, metadata_dir)


def _placement(copied: bool, in_huge_pages: bool) -> str:
    """Where the served blocks live, in words for the load log."""
    if not copied:
        return "on the file mapping"
    return "one copy, advised into huge pages" if in_huge_pages else "one copy; the system refused huge pages for it"


def prepare_native(spec: str) -> None:
    """Fetch the GGUF a known name or ``.gguf`` path names and cache its config and tokenizer, so that
    processes started later with ``spec`` load it in seconds (nothing for any other ``spec``)."""
    gguf = gguf_model(spec)
    if gguf is not None:
        cached_metadata(gguf.key, gguf.served_name, gguf.locate)


def _setup_reason(dtype: str, device: str) -> str | None:
    """Why this engine setup cannot serve a GGUF natively (cheap checks, before the file is read)."""
    if torch.device(device).type != "cpu":
        return f"device {device}: native GGUF weights run on the CPU"
    if dtype not in NATIVE_DTYPES:
        return f"dtype {dtype}: native GGUF weights run float32 activations"
    if not use_cpp(torch.device("cpu")):
        return "the C++ CPU kernels are not loaded"
    return None


def _fallback(gguf: GGUFModel, reason: str) -> None:
    """The one log line of a GGUF that falls back to its float32 conversion."""
    logger.warning("%s cannot be served from its GGUF blocks (%s): using its float32 conversion", gguf.served_name,
                   reason)


def meta_model(metadata_dir: Path) -> torch.nn.Module:
    """The Hugging Face model of the folder's config with every parameter and buffer on ``meta``."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(metadata_dir), local_files_only=True)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")


def _set_parameter(model: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    module_name, _, attr = name.rpartition(".")
    module = model.get_submodule(module_name)
    setattr(module, attr, torch.nn.Parameter(value, requires_grad=False))
