"""A GGUF file's matmul weights kept in their quantized blocks for the lean decoder (CPU).

The model itself loads from the float32 folder that ``model.gguf`` converts once (config, tokenizer,
norms, biases, embeddings). :func:`quantized_matmuls` then reads the file's quantized matmul weights
(``blk.N.attn_q`` ... ``ffn_down``, the LM head) so that every step multiplies by them
(``kernels.quant``) instead of by the float32 copies.

Invariants:
- A quantized matmul is used only when its dequantized rows equal the float32 weights the model loaded
  (as numbers: bit for bit up to the sign of a zero), after a row reorder found by matching rows
  (llama's Q and K rows are stored permuted in GGUF); a part that does not match, or whose type has no
  kernel, leaves that matmul in float32 (one log line names it). So native weights compute the
  dequantized model's function, up to summation order.
- Only the file's tensor table is parsed (:func:`read_tensor_table`; gguf-py's reader parses every
  metadata field, a 150k-entry vocabulary included, which takes tens of seconds); tensors are
  memory-mapped and repacked one at a time. A file this reader cannot parse keeps every matmul float32.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels.quant import GGML_BLOCKS, QuantMatmul, QuantWeight

logger = logging.getLogger(__name__)

# Lean decoder matmul -> the GGUF tensors it concatenates (output features in this order).
LAYER_PARTS: dict[str, tuple[str, ...]] = {
    "qkv_w": ("attn_q", "attn_k", "attn_v"),
    "o_w": ("attn_output",),
    "gate_up_w": ("ffn_gate", "ffn_up"),
    "down_w": ("ffn_down",),
}
HEAD = "head_w"


@dataclass(frozen=True)
class TensorInfo:
    """A GGUF tensor: ``name``, GGML type id ``tensor_type``, ``shape`` in GGML order (row length first)
    and its bytes as a read-only ``data`` memmap ``[rows, row_bytes]``."""

    name: str
    tensor_type: int
    shape: tuple[int, ...]
    data: np.ndarray


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_tensor_table(path: Path) -> dict[str, TensorInfo]:
    """The tensors of a little-endian GGUF (v2, v3) by name; ``ValueError`` if it cannot be parsed."""
    from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

    raw = np.memmap(path, dtype=np.uint8, mode="r")
    buf, pos = raw.data, 0

    def take(fmt: str) -> Any:
        nonlocal pos
        value = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return value[0]

    def skip_value(vtype: int) -> None:
        nonlocal pos
        if vtype == _STRING:
            length = take("Q")  # read before the += (which would load pos first)
            pos += length
        elif vtype == _ARRAY:
            item, count = take("I"), take("Q")
            if item in _SCALARS:
                pos += count * struct.calcsize(_SCALARS[item])
            else:
                for _ in range(count):
                    skip_value(item)
        else:
            pos += struct.calcsize(_SCALARS[vtype])

    try:
        magic, version = take("4s"), take("I")
        if magic != b"GGUF" or version not in (2, 3):
            raise ValueError("not a little-endian GGUF v2 or v3")
        n_tensors, n_kv = take("Q"), take("Q")
        alignment = GGUF_DEFAULT_ALIGNMENT
        for _ in range(n_kv):
            key = bytes(buf[pos + 8 : pos + 8 + take("Q")]).decode()
            pos += len(key.encode())
            vtype = take("I")
            if key == "general.alignment" and vtype == 4:
                alignment = take("I")
            else:
                skip_value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = bytes(buf[pos + 8 : pos + 8 + take("Q")]).decode()
            pos += len(name.encode())
            shape = tuple(take("Q") for _ in range(take("I")))
            infos.append((name, shape, take("I"), take("Q")))
        start = -(-pos // alignment) * alignment
        table = {}
        for name, shape, qtype, offset in infos:
            block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
            rows, row_bytes = int(np.prod(shape[1:], dtype=np.int64)), shape[0] // block * nbytes
            data = raw[start + offset : start + offset + rows * row_bytes].reshape(rows, row_bytes)
            table[name] = TensorInfo(name, qtype, shape, data)
        return table
    except (struct.error, KeyError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read the tensor table of {path}: {exc}") from exc


def quantized_matmuls(gguf_path: Path, decoder: Any) -> dict[str, QuantMatmul]:
    """``{"layers.<i>.<matmul>" | "head_w": QuantMatmul}`` for every matmul of ``decoder`` (a
    ``LeanDecoder``) whose GGUF parts are served natively and match its float32 weights."""
    try:
        tensors = read_tensor_table(gguf_path)
    except ValueError as exc:
        logger.warning("GGUF weights stay float32: %s", exc)
        return {}
    found: dict[str, QuantMatmul] = {}
    for i, layer in enumerate(decoder.layers):
        for name, parts in LAYER_PARTS.items():
            matmul = _matmul([tensors.get(f"blk.{i}.{p}.weight") for p in parts], getattr(layer, name))
            if matmul is not None:
                found[f"layers.{i}.{name}"] = matmul
    for head in ("output.weight", "token_embd.weight"):  # a tied head may be either tensor
        matmul = _matmul([tensors.get(head)], decoder.head_w) if head in tensors else None
        if matmul is not None:
            found[HEAD] = matmul
            break
    kept = len(LAYER_PARTS) * len(decoder.layers) + 1 - len(found)
    logger.info("GGUF weights: %d matmuls quantized (%.0f MB), %d float32", len(found),
                sum(m.nbytes for m in found.values()) / 2**20, kept)
    return found


def _matmul(tensors: list[TensorInfo | None], reference: torch.Tensor) -> QuantMatmul | None:
    """The quantized parts stacked as ``reference`` [N, K] stacks them, or None (see the invariants)."""
    parts, row = [], 0
    for t in tensors:
        if t is None or t.tensor_type not in GGML_BLOCKS:
            _fallback(t, "no native kernel for its type" if t is not None else "not in the file")
            return None
        try:
            weight = QuantWeight.from_gguf(torch.from_numpy(np.array(t.data)), t.tensor_type, int(reference.shape[1]))
        except ValueError as exc:  # a shape that does not fit the loaded weight
            _fallback(t, str(exc))
            return None
        ordered = _matching_rows(weight, reference[row : row + weight.out_features])
        if ordered is None:
            _fallback(t, "its dequantized rows differ from the loaded float32 weights")
            return None
        parts.append(ordered)
        row += weight.out_features
    if row != reference.shape[0]:
        _fallback(tensors[0], f"{row} rows in the file against {reference.shape[0]} loaded")
        return None
    return QuantMatmul.of(parts)


def _matching_rows(weight: QuantWeight, reference: torch.Tensor) -> QuantWeight | None:
    """``weight`` with its rows reordered to equal ``reference`` as numbers, or None."""
    if weight.out_features != reference.shape[0]:
        return None
    values = weight.dequantize()
    if torch.equal(values, reference):
        return weight
    # Rows compare as numbers: + 0.0 makes every zero +0 (a Q4_0 zero may come out -0 on one side).
    where = {row.tobytes(): i for i, row in enumerate((values + 0.0).numpy())}
    index = [where.get(row.tobytes()) for row in (reference.detach() + 0.0).numpy()]
    if any(i is None for i in index):
        return None
    return weight.rows(torch.tensor(index, dtype=torch.int64))


def _fallback(tensor: TensorInfo | None, why: str) -> None:
    name = "a matmul weight" if tensor is None else tensor.name
    logger.info("GGUF weights: %s (GGML type %s) stays float32: %s", name,
                "?" if tensor is None else tensor.tensor_type, why)
