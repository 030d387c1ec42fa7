"""The tensor table of a GGUF file, parsed without reading its metadata values, each tensor mapped on demand.

gguf-py's ``GGUFReader`` parses every metadata field (a 150k-entry vocabulary included: tens of
seconds); :func:`read_tensor_table` skips the values and reads only ``general.architecture`` and the
tensors' names, types, shapes and offsets (milliseconds).

Invariants:
- Every tensor of the table lies inside the file (checked here, so a truncated file is a
  ``ValueError`` naming it, never a fault later).
- :meth:`GGUFTensor.array` maps only that tensor's bytes, read-only, for as long as the returned
  array (or a view of it, a torch tensor made by ``torch.from_numpy`` included) lives: dropping every
  reference unmaps it, so pages needed only at load time do not stay resident.
"""

from __future__ import annotations

import struct
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
    its header cannot be parsed, a tensor has an unknown type or lies past the end of the file."""
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
        infos = []
        for _ in range(n_tensors):
            name = cur.text()
            shape = tuple(cur.take("Q") for _ in range(cur.take("I")))
            infos.append((name, shape, cur.take("I"), cur.take("Q")))
        start = -(-cur.pos // alignment) * alignment
        table = {}
        for name, shape, qtype, offset in infos:
            block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
            rows, row_bytes = int(np.prod(shape[1:], dtype=np.int64)), shape[0] // block * nbytes
            tensor = GGUFTensor(path, name, qtype, shape, start + offset, rows, row_bytes)
            if tensor.offset + tensor.nbytes > size:
                raise ValueError(f"tensor {name} ends past the end of the file ({size} bytes)")
            table[name] = tensor
        return GGUFTable(path, architecture, table)
    except (struct.error, KeyError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"cannot read the tensor table of {path}: {exc}") from exc
