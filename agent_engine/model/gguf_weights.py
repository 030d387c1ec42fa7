"""A GGUF file's tensors as a Llama-family model's weights: matmuls and embedding in their quantized
blocks (zero-copy views of the memory-mapped file, or one copy of them in huge pages:
:func:`quantized_weights` with ``huge_pages``), norms and biases as float32.

Invariants:
- Each quantized part is ``QuantWeight.from_gguf`` of ``torch.from_numpy`` of the tensor's own
  read-only mapping (:meth:`GGUFTensor.array`): without an arena :func:`quantized_weights` copies
  nothing, and what the result keeps of the file is the kernels' choice. With huge pages
  (``huge_pages=True``), each part is copied into huge pages as it is read and its mapping is released
  before the next is read: one copy in the end, and at most one tensor's mapping beside the arena
  while loading (the process never holds the whole file twice).
- llama-architecture files store the Q and K rows of each head interleaved (llama.cpp's converter
  permutes them); :func:`llama_rows` is the row order that undoes it (transformers'
  ``reverse_permute_weights``, K with the KV head count), applied to the quantized rows with
  ``QuantWeight.rows`` and to a Q or K bias. Other architectures are stored in Hugging Face order.
- The LM head is ``output.weight``, else ``token_embd.weight`` (tied): then head and embedding are
  one ``QuantMatmul``.
- :func:`check_types` raises :class:`NotNative` naming the first tensor the kernels cannot serve (a
  matrix whose GGML type has no kernel, a norm or bias not in F32); :func:`check_native` also names a
  tensor the model does not map. A tensor missing or of a shape other than the config's is a
  ``ValueError`` (the file is corrupt).
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import torch

from agent_engine.model.gguf_tensors import GGML_F32, GGUFTable, GGUFTensor
from agent_engine.model.lean_decoder import QuantizedWeights
from kernels.huge_pages import HugePageArena
from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight

# Lean decoder matmul -> the GGUF tensors it concatenates (output features in this order).
LAYER_PARTS: dict[str, tuple[str, ...]] = {
    "qkv_w": ("attn_q", "attn_k", "attn_v"),
    "o_w": ("attn_output",),
    "gate_up_w": ("ffn_gate", "ffn_up"),
    "down_w": ("ffn_down",),
}
# A Hugging Face parameter of a Llama-family decoder layer -> its GGUF tensor (without "blk.N.").
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER_PARAM = re.compile(r"model\.layers\.(\d+)\.(.+)")
EMBEDDING, HEAD, OUTPUT = "token_embd.weight", "output.weight", "output_norm.weight"
PERMUTED_ARCHITECTURES = ("llama",)


class NotNative(Exception):
    """The file cannot be served from its quantized blocks; the message says which tensor and why."""


def gguf_name(hf_name: str, table: GGUFTable) -> str:
    """The GGUF tensor holding the Hugging Face parameter ``hf_name`` (``NotNative`` if none does)."""
    if hf_name == "model.embed_tokens.weight":
        return EMBEDDING
    if hf_name == "lm_head.weight":
        return HEAD if HEAD in table.tensors else EMBEDDING
    if hf_name == "model.norm.weight":
        return OUTPUT
    match = _LAYER_PARAM.fullmatch(hf_name)
    if match is None or match.group(2) not in _LAYER_NAMES:
        raise NotNative(f"the parameter {hf_name} has no GGUF tensor this loader maps")
    return f"blk.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"


def check_types(table: GGUFTable) -> None:
    """``NotNative`` naming the first tensor whose type the kernels cannot serve: a matrix in a GGML
    type without a kernel, or a vector (norm, bias) not in F32."""
    for tensor in table.tensors.values():
        if len(tensor.shape) >= 2 and tensor.tensor_type not in GGML_BLOCKS:
            raise NotNative(f"tensor {tensor.name} is GGML type {type_name(tensor.tensor_type)}, which has no native "
                            f"kernel (served: {', '.join(n for n, _, _ in GGML_BLOCKS.values())})")
        if len(tensor.shape) == 1 and tensor.tensor_type != GGML_F32:
            raise NotNative(f"tensor {tensor.name} is GGML type {type_name(tensor.tensor_type)}, not F32")


def check_native(table: GGUFTable, params: dict[str, tuple[int, ...]]) -> None:
    """``NotNative`` or ``ValueError`` (see the invariants) unless every parameter in ``params`` (Hugging
    Face name -> shape) is in the file, of its shape and in a type served natively, and every tensor of
    the file is one of them."""
    check_types(table)
    used = set()
    for hf_name, shape in params.items():
        name = gguf_name(hf_name, table)
        tensor = table.tensors.get(name)
        if tensor is None:
            raise ValueError(f"{table.path}: tensor {name} (for {hf_name}) is missing")
        if tuple(reversed(tensor.shape)) != tuple(shape):
            raise ValueError(f"{table.path}: tensor {name} has shape {tuple(reversed(tensor.shape))}, "
                             f"the config gives {tuple(shape)}")
        used.add(name)
    extra = sorted(set(table.tensors) - used)
    if extra:
        raise NotNative(f"tensor {extra[0]} (of {len(extra)} unused) is not part of the model this loader builds")


def type_name(qtype: int) -> str:
    """A GGML type id's name (``Q4_K``), or the id if gguf-py does not know it."""
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType(qtype).name
    except ValueError:
        return str(qtype)


def llama_rows(rows: int, n_head: int) -> torch.Tensor:
    """The row order of a llama GGUF's Q or K weight (``n_head`` heads) in Hugging Face order: row ``i``
    of the result is row ``index[i]`` of the file. The file's head ``h`` holds its ``d = rows / n_head / 2``
    rotary pairs interleaved (row ``2i + j`` of the head is Hugging Face row ``j * d + i``)."""
    if rows % (2 * n_head):
        raise ValueError(f"{rows} rows do not split into {n_head} heads of rotary pairs")
    return torch.arange(rows).view(n_head, rows // n_head // 2, 2).transpose(1, 2).reshape(-1)


def _blocks(tensor: GGUFTensor) -> torch.Tensor:
    """A zero-copy uint8 ``[rows, row_bytes]`` torch view of the tensor's mapping."""
    with warnings.catch_warnings():  # read-only pages: torch warns that it cannot write them (it never does)
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(tensor.array())


def quant_part(tensor: GGUFTensor, order: torch.Tensor | None = None,
               arena: HugePageArena | None = None) -> QuantWeight:
    """The tensor as a ``QuantWeight`` ``[rows, row_length]``, its rows in ``order`` if given, its blocks
    copied into ``arena`` if given (the tensor's mapping is then released on return)."""
    weight = QuantWeight.from_gguf(_blocks(tensor), tensor.tensor_type, tensor.row_length)
    weight = weight if order is None else weight.rows(order)
    return weight if arena is None else dataclasses.replace(weight, raw=arena.place(weight.raw))


def served_tensors(table: GGUFTable, num_layers: int) -> list[GGUFTensor]:
    """The tensors :func:`quantized_weights` reads: every layer's matmul parts, the embedding, the head."""
    names = [f"blk.{i}.{name}.weight" for i in range(num_layers) for parts in LAYER_PARTS.values() for name in parts]
    names += [EMBEDDING] + ([HEAD] if HEAD in table.tensors else [])
    return [table.tensors[name] for name in names]


def quantized_weights(table: GGUFTable, num_layers: int, heads: tuple[int, int],
                      huge_pages: bool = False) -> QuantizedWeights:
    """Every matmul of a ``num_layers``-layer decoder with ``heads`` = (query, KV) heads, and its
    embedding, from ``table`` (checked by :func:`check_native` first): views of the file's mappings, or
    with ``huge_pages`` copies in one arena sized for :func:`served_tensors`, made one tensor at a time
    (``in_huge_pages`` says whether the system agreed to back it with huge pages)."""
    arena = None
    if huge_pages:
        arena = HugePageArena(sum(HugePageArena.room(t.nbytes) for t in served_tensors(table, num_layers)))

    def part(name: str, index: int) -> QuantWeight:
        tensor = table.tensors[f"blk.{index}.{name}.weight"]
        return quant_part(tensor, permutation(table, name, tensor.rows, heads), arena)

    layers = tuple({key: QuantMatmul.of([part(name, i) for name in names]) for key, names in LAYER_PARTS.items()}
                   for i in range(num_layers))
    embedding = QuantMatmul.of([quant_part(table.tensors[EMBEDDING], arena=arena)])
    head = QuantMatmul.of([quant_part(table.tensors[HEAD], arena=arena)]) if HEAD in table.tensors else embedding
    return QuantizedWeights(layers, head, embedding, in_huge_pages=arena is not None and arena.advised)


def permutation(table: GGUFTable, part: str, rows: int, heads: tuple[int, int]) -> torch.Tensor | None:
    """The row order of layer tensor ``part`` (``attn_q``, ``attn_k``, ...) in Hugging Face order, or
    None where the file stores it so."""
    if table.architecture not in PERMUTED_ARCHITECTURES or part not in ("attn_q", "attn_k"):
        return None
    return llama_rows(rows, heads[0] if part == "attn_q" else heads[1])


def float_tensor(table: GGUFTable, hf_name: str, heads: tuple[int, int]) -> torch.Tensor:
    """A norm weight or bias (F32 in the file) as a float32 tensor, a Q or K bias in Hugging Face order."""
    name = gguf_name(hf_name, table)
    values = torch.from_numpy(table.tensors[name].float32())
    part = name.split(".")[-2]
    order = permutation(table, part, values.shape[0], heads)
    return values if order is None else values.index_select(0, order)

