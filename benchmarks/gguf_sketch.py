"""A GGUF file's sketch: its header whole and a sample of each tensor's blocks, small enough to carry
where the file itself cannot go, and the file rebuilt from it with the same layout.

    python -m benchmarks.gguf_sketch sketch MODEL SKETCH.npz [--sample-bytes 65536]
    python -m benchmarks.gguf_sketch expand SKETCH.npz OUT.gguf

A speed comparison needs the model's shapes, tensor types, tokenizer and metadata, not its trained
values: a matmul on Q4_K blocks costs the same whatever the blocks hold. The sketch keeps the file's
first bytes up to its data section (metadata with the tokenizer, tensor infos) and, per tensor, its
first ``--sample-bytes`` rounded down to whole blocks (a tensor no larger is kept whole). Expanding
writes the header back and fills each tensor at its own offset by repeating its sample, so every
block is a real block of that tensor (its scales and value range), and a reader sees the same file
but for the repeats. The rebuilt model's outputs are not the model's; only its speed is.

Invariants: the expanded file has the original's size, header bytes and tensor offsets; a tensor
no larger than the sample is byte for byte the original; a tiled tensor repeats whole blocks of its
own type from its start. Expanding needs numpy only (no ``gguf`` package), so it runs on a bare
machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEFAULT_SAMPLE_BYTES = 65536
FORMAT = "agent-engine gguf sketch 1"


def sketch(model: Path, out: Path, sample_bytes: int = DEFAULT_SAMPLE_BYTES) -> dict[str, int]:
    """Write ``out`` (an ``.npz``) from the GGUF file ``model``; returns the file's and the sketch's
    byte counts. ValueError when the sample size is not positive."""
    from gguf import GGML_QUANT_SIZES, GGUFReader

    if sample_bytes < 1:
        raise ValueError(f"--sample-bytes must be positive, got {sample_bytes}")
    reader = GGUFReader(model)
    raw = np.memmap(model, dtype=np.uint8, mode="r")
    index, arrays = [], {"header": np.array(raw[: reader.data_offset])}
    for i, tensor in enumerate(reader.tensors):
        block_bytes = GGML_QUANT_SIZES[tensor.tensor_type][1]
        keep = min(int(tensor.n_bytes), max(block_bytes, sample_bytes // block_bytes * block_bytes))
        start = int(tensor.data_offset)
        arrays[f"t{i}"] = np.array(raw[start:start + keep])
        index.append({"name": tensor.name, "offset": start, "bytes": int(tensor.n_bytes)})
    meta = {"format": FORMAT, "source": model.name, "size": int(raw.shape[0]), "tensors": index}
    arrays["index"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with out.open("wb") as f:  # a file handle: numpy would add ".npz" to a name without it
        np.savez_compressed(f, **arrays)
    return {"file_bytes": meta["size"], "sketch_bytes": out.stat().st_size}


def expand(sketch_path: Path, out: Path) -> dict[str, int]:
    """Rebuild the sketched file at ``out``; returns its size and the number of tiled tensors.
    ValueError when ``sketch_path`` is not a sketch of this format."""
    with np.load(sketch_path) as arrays:
        meta = json.loads(arrays["index"].tobytes())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{sketch_path} is not a GGUF sketch ({FORMAT!r})")
        tiled = 0
        with out.open("wb") as f:
            f.truncate(meta["size"])
            f.write(arrays["header"].tobytes())
            for i, tensor in enumerate(meta["tensors"]):
                sample = arrays[f"t{i}"]
                tiled += int(sample.shape[0] < tensor["bytes"])
                f.seek(tensor["offset"])
                f.write(np.resize(sample, tensor["bytes"]).tobytes())
    return {"file_bytes": meta["size"], "tiled_tensors": tiled}


def main(argv: Sequence[str] | None = None) -> int:
    """``sketch MODEL SKETCH.npz`` or ``expand SKETCH.npz OUT.gguf``."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gguf_sketch", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sketch", help="a GGUF file (or known model name) -> its sketch (.npz)")
    s.add_argument("model")
    s.add_argument("sketch", type=Path)
    s.add_argument("--sample-bytes", type=int, default=DEFAULT_SAMPLE_BYTES,
                   help=f"bytes kept per tensor, whole blocks (default {DEFAULT_SAMPLE_BYTES})")
    e = sub.add_parser("expand", help="a sketch -> a GGUF file of the same layout")
    e.add_argument("sketch", type=Path)
    e.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    if args.command == "sketch":
        from agent_engine.model.sources import gguf_source

        model = gguf_source(args.model)
        if model is None:
            print(f"gguf_sketch: {args.model} is not a GGUF file or known GGUF name", file=sys.stderr)
            return 2
        print(json.dumps(sketch(Path(model), args.sketch, args.sample_bytes)))
    else:
        print(json.dumps(expand(args.sketch, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
