"""Quantized matmuls (``agent-engine bench kernels --quant``): GGUF weights in the engine's kernel
(int8 dot products straight on the file's blocks) against the float32 panel path on the same
(dequantized) weights.

The weights are ``--layers`` layers of a served model's shapes in its Q4_K_M file's types
(``--quant-shapes``: Qwen2.5-Coder-0.5B's QKV, O and gate/up in Q5_0, down in Q4_K; or 1.5B's in Q4_K,
down in Q6_K; random blocks): together larger than the caches, as a decode step finds them. Per row count: ms per pass for ``gguf_linear_int8`` and for ``panel_linear``, their
ratio, and the quantized pass's multiply-adds per second and weight bytes read per second (the two
ceilings of ``bench kernels --roofline``). Invariant: both paths' results agree (within 3% of the
largest output: the quantized path rounds activations to int8 per block) before anything is timed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.roofline import best_seconds

# (output features, input features, GGML type): one layer as each model's Q4_K_M file stores it (fused QKV,
# O, fused gate/up, down).
LAYER_SHAPES = {
    "qwen2.5-coder-0.5b": ((1152, 896, 6), (896, 896, 6), (9728, 896, 6), (896, 4864, 12)),
    "qwen2.5-coder-1.5b": ((2048, 1536, 12), (1536, 1536, 12), (17920, 1536, 12), (1536, 8960, 14)),
}
QWEN_LAYER = LAYER_SHAPES["qwen2.5-coder-0.5b"]
HEADERS = ["threads", "rows", "quant ms", "float32 panels ms", "quant / float32", "quant GMAC/s", "quant GB/s"]


def random_blocks(qtype: int, n: int, k: int, seed: int = 0) -> np.ndarray:
    """``[n, row_bytes]`` random GGUF blocks of ``qtype`` whose fp16 scales are finite and small."""
    from kernels.quant import GGML_BLOCKS

    rng = np.random.default_rng(seed)
    _, block, nbytes = GGML_BLOCKS[qtype]
    raw = rng.integers(0, 256, size=(n, k // block, nbytes), dtype=np.uint8)
    offsets = [208] if qtype == 14 else [0, 2] if qtype in (3, 7, 12) else [0]  # Q6_K keeps d last
    for off in offsets:
        half = rng.uniform(-0.05, 0.05, size=(n, k // block)).astype(np.float16)
        raw[..., off : off + 2] = half.view(np.uint8).reshape(n, k // block, 2)
    return raw.reshape(n, -1)


def bench_quant(rows: list[int], layers: int, repeats: int,
                shapes: tuple[tuple[int, int, int], ...] = QWEN_LAYER) -> list[dict[str, Any]]:
    """Per row count: seconds per pass over ``layers`` layers of ``shapes``, quantized and float32 panels."""
    import torch

    from kernels.cpu_ops import linear
    from kernels.prepack import pack_weight
    from kernels.quant import QuantWeight

    quant = [QuantWeight.from_gguf(torch.from_numpy(random_blocks(t, n, k, seed=i)), t, k)
             for i in range(layers) for n, k, t in shapes]
    plain = [(w, pack_weight(w)) for w in (q.dequantize() for q in quant)]
    macs = sum(q.out_features * q.in_features for q in quant)
    out = []
    for m in rows:
        xs = {k: torch.randn(m, k) for _, k, _ in shapes}
        for q, (w, p) in zip(quant[: len(shapes)], plain, strict=False):
            x = xs[q.in_features]
            ref = linear(x, w, None, True, p)
            if float((q.linear(x) - ref).abs().max()) > 0.03 * float(ref.abs().max()):
                raise AssertionError(f"quantized and float32 products disagree at {m} rows")
        quant_s = best_seconds(lambda xs=xs: [q.linear(xs[q.in_features]) for q in quant], repeats)
        plain_s = best_seconds(lambda xs=xs: [linear(xs[w.shape[1]], w, None, True, p) for w, p in plain], repeats)
        out.append({"rows": m, "quant_ms": quant_s * 1e3, "float32_ms": plain_s * 1e3,
                    "quant_gmacs": macs * m / quant_s / 1e9,
                    "quant_gbs": sum(q.nbytes for q in quant) / quant_s / 1e9})
    return out


def table_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    """The printed rows (``HEADERS``) of ``bench_quant`` results tagged with ``threads``."""
    return [[r["threads"], r["rows"], r["quant_ms"], r["float32_ms"], r["quant_ms"] / r["float32_ms"],
             r["quant_gmacs"], r["quant_gbs"]] for r in results]
