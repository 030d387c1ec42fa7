"""A GGUF sketch rebuilds a file of the same layout: header and small tensors byte for byte, large
tensors tiled from their own first blocks; the rebuilt file reads as the original does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.gguf_sketch import expand, main, sketch
from tests.gguf_helpers import write_tiny_llama_gguf

pytestmark = pytest.mark.core

Q8_0 = 8


def _tensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    from gguf import GGUFReader

    reader = GGUFReader(path)
    return {t.name: (t.tensor_type.name, np.asarray(t.data).view(np.uint8).ravel().copy()) for t in reader.tensors}


def test_expand_keeps_layout_header_and_small_tensors(tmp_path: Path) -> None:
    src, sk, out = tmp_path / "m.gguf", tmp_path / "m.npz", tmp_path / "rebuilt.gguf"
    write_tiny_llama_gguf(src, quant={"attn_q": Q8_0, "ffn_up": Q8_0})
    sample = 34 * 3  # three Q8_0 blocks: smaller than the quantized matrices, larger than the norms
    sketch(src, sk, sample_bytes=sample)
    got = expand(sk, out)
    assert out.stat().st_size == src.stat().st_size == got["file_bytes"]
    original, rebuilt = _tensors(src), _tensors(out)
    assert rebuilt.keys() == original.keys()
    tiled = 0
    for name, (kind, data) in original.items():
        kind2, data2 = rebuilt[name]
        assert kind2 == kind and data2.shape == data.shape
        if data.size <= sample:
            assert np.array_equal(data2, data), name
            continue
        tiled += 1
        keep = sample if kind == "Q8_0" else sample // 4 * 4  # whole blocks of the tensor's own type
        assert np.array_equal(data2, np.resize(data[:keep], data.size)), name
    assert tiled == got["tiled_tensors"] > 0
    from gguf import GGUFReader

    assert GGUFReader(out).data_offset == GGUFReader(src).data_offset


def test_cli_round_trip_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, sk, out = tmp_path / "m.gguf", tmp_path / "m.sketch", tmp_path / "r.gguf"  # any name, as given
    write_tiny_llama_gguf(src)
    assert main(["sketch", str(src), str(sk), "--sample-bytes", str(1 << 24)]) == 0
    assert main(["expand", str(sk), str(out)]) == 0
    assert out.read_bytes() == src.read_bytes()  # every tensor fits the sample
    assert main(["sketch", str(tmp_path / "absent.txt"), str(sk)]) == 2
    assert "not a GGUF file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="positive"):
        sketch(src, sk, sample_bytes=0)
    np.savez(tmp_path / "other.npz", index=np.frombuffer(b'{"format": "x"}', dtype=np.uint8))
    with pytest.raises(ValueError, match="not a GGUF sketch"):
        expand(tmp_path / "other.npz", out)
