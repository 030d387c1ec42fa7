"""The tensor table of a GGUF file, parsed without reading its metadata values, each tensor mapped on demand.

gguf-py's ``GGUFReader`` parses every metadata field (a 150k-entry vocabulary included: tens of
seconds); :func:`read_tensor_table` skips the values and reads only ``general.architecture`` and the
tensors' names, types, shapes and offsets (milliseconds).

Invariants:
- Every tensor of the table lies inside the file's data section, and no two tensors share a byte
  (:func:`check_layout`, run by :func:`read_tensor_table`): a truncated file, an offset past the end or
  into the header, or two tensors pointed at the same bytes (a tampered file that would load and
  answer garbage) is a ``ValueError`` naming the tensor (both, for an overlap), never a fault or a
  silently wrong model later.
- :meth:`GGUFTensor.array` maps only that tensor's bytes, read-only, for as long as the returned
  array (or a view of it, a torch tensor made by ``torch.from_numpy`` included) lives: dropping every
  reference unmaps it, so pages needed only at load time do not stay resident.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GGML_F32 = 0  # the GGML type id of float32 tensors (norms and biases)


@dataclass(frozen=True)
class GGUFTensor:
    """A GGUF tensor: ``name``, GGML type id ``tensor_type``, ``shape`` in GGML order (row length
    first), and where its ``rows`` rows of ``row_bytes`` bytes lie in ``path`` (from ``offset``)."""

    path: Path
    name: str
    tensor_type: int
    shape: tuple[int, ...]
    offset: int
    rows: int
    row_bytes: int

    @property
    def row_length(self) -> int:
        """Values per row (the input features of a matmul weight)."""
        return int(self.shape[0])

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def array(self) -> np.ndarray:
        """The tensor's bytes as a read-only uint8 memmap ``[rows, row_bytes]`` (a mapping of its own)."""
        return np.memmap(self.path, dtype=np.uint8, mode="r", offset=self.offset, shape=(self.rows, self.row_bytes))

    def float32(self) -> np.ndarray:
        """A float32 (``F32``) tensor's values, copied out of the file, in GGML order reversed (numpy's)."""
        if self.tensor_type != GGML_F32:
            raise ValueError(f"{self.name} is GGML type {self.tensor_type}, not F32")
        return np.array(self.array()).view(np.float32).reshape(tuple(reversed(self.shape)))


@dataclass(frozen=True)
class GGUFTable:
    """A GGUF file ``path``: its ``general.architecture`` ("" if absent) and its tensors by name."""

    path: Path
    architecture: str
    tensors: dict[str, GGUFTensor]


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Cursor:
    """Reads little-endian values from a buffer, advancing ``pos``."""

    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return value

    def text(self) -> str:
        length = self.take("Q")
        value = bytes(self.buf[self.pos : self.pos + length]).decode()
        self.pos += length
        return value

    def skip_value(self, vtype: int) -> None:
        if vtype == _STRING:
            length = self.take("Q")  # before the += (which would load pos first)
            self.pos += length
        elif vtype == _ARRAY:
            item, count = self.take("I"), self.take("Q")
            if item in _SCALARS:
                self.pos += count * struct.calcsize(_SCALARS[item])
            else:
                for _ in range(count):
                    self.skip_value(item)
        else:
            self.pos += struct.calcsize(_SCALARS[vtype])


def read_tensor_table(path: Path) -> GGUFTable:
    """The architecture and tensors of a little-endian GGUF (v2, v3); ``ValueError`` naming the file if
    its header cannot be parsed, a tensor has an unknown type or shape, lies outside the data section or
    overlaps another (:func:`check_layout`)."""
    from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

    size = path.stat().st_size
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        cur = _Cursor(raw.data)
        if bytes(raw[:4]) != b"GGUF":
            raise ValueError("no GGUF magic bytes")
        cur.pos = 4
        if cur.take("I") not in (2, 3):
            raise ValueError("not a little-endian GGUF v2 or v3")
        n_tensors, n_kv = cur.take("Q"), cur.take("Q")
        alignment, architecture = GGUF_DEFAULT_ALIGNMENT, ""
        for _ in range(n_kv):
            key, vtype = cur.text(), cur.take("I")
            if key == "general.alignment" and vtype == 4:
                alignment = cur.take("I")
            elif key == "general.architecture" and vtype == _STRING:
                architecture = cur.text()
            else:
                cur.skip_value(vtype)
        if alignment < 1:
            raise ValueError(f"general.alignment {alignment} is not positive")
        infos = []
        for _ in range(n_tensors):
            name = cur.text()
            shape = tuple(cur.take("Q") for _ in range(cur.take("I")))
            infos.append((name, shape, cur.take("I"), cur.take("Q")))
        start = -(-cur.pos // alignment) * alignment
        table = {}
        for name, shape, qtype, offset in infos:
            block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
            if not shape or shape[0] % block:
                raise ValueError(f"tensor {name} has shape {shape}, not rows of whole {block}-value blocks")
            rows, row_bytes = math.prod(shape[1:]), shape[0] // block * nbytes
            table[name] = GGUFTensor(path, name, qtype, shape, start + offset, rows, row_bytes)
        check_layout(table.values(), start, size)
        return GGUFTable(path, architecture, table)
    except (struct.error, KeyError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read the tensor table of {path}: {exc}") from exc


def check_layout(tensors: Iterable[GGUFTensor], data_start: int, size: int) -> None:
    """``ValueError`` unless every tensor lies in ``[data_start, size)`` (the data section of a file of
    ``size`` bytes) and no two share a byte; the message names the tensor, or both tensors of an
    overlap, with their byte ranges."""
    spans = []
    for t in tensors:
        end = t.offset + t.nbytes
        if t.offset < data_start or end > size:
            raise ValueError(f"tensor {t.name} (bytes {t.offset}-{end}) lies outside the file's data section "
                             f"(bytes {data_start}-{size}): past the end of the file or corrupt")
        if t.nbytes:
            spans.append((t.offset, end, t.name))
    spans.sort()
    for (start_a, end_a, a), (start_b, end_b, b) in zip(spans, spans[1:], strict=False):
        if start_b < end_a:
            raise ValueError(f"tensors {a} (bytes {start_a}-{end_a}) and {b} (bytes {start_b}-{end_b}) overlap: "
                             "the file is corrupt or tampered with")
