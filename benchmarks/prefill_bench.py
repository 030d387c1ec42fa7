"""Prefill-step kernels (``agent-engine bench kernels --prefill``), each pair timed side by side.

* outputs: ``--layers`` layers of the embedded model's matmuls (QKV, O, gate/up, down; float32 panels)
  at prefill row counts, once with a fresh output tensor per call (what the lean decoder did) and once
  writing into outputs allocated before (what it does now: one buffer per role and step). Fresh
  multi-megabyte outputs cost the allocator's page faults on every call.
* attention routes: the C++ paged kernel against SDPA (``kernels.paged_attention``'s two CPU routes)
  on fresh prompt chunks and on chunks over a cached context, GQA 8/2, head size 64; the ratio says
  where the routes cross on this CPU (what ``kernels.route_calibration`` measures at first use).

Invariant: both variants of a pair compute the same result (checked before timing, float32 tolerance).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from benchmarks.roofline import best_seconds

PREFILL_ROWS = (1024, 2048, 4096)
EMBEDDED_LAYER = ((768, 512), (512, 512), (2816, 512), (512, 1408))  # (out, in) of QKV, O, gate/up, down
# (requests, query tokens each, cached context each)
ROUTE_CASES = ((1, 128, 0), (8, 64, 0), (2, 512, 0), (1, 1024, 0), (1, 2048, 0), (1, 32, 2000), (1, 64, 2000),
               (1, 256, 2000))
OUTPUT_HEADERS = ["threads", "rows", "fresh outputs ms", "reused outputs ms", "fresh / reused", "reused GFLOP/s"]
ROUTE_HEADERS = ["threads", "requests", "query", "context", "C++ ms", "SDPA ms", "C++ / SDPA"]


def bench_outputs(rows: list[int], layers: int, repeats: int) -> list[dict[str, Any]]:
    """ms per pass over every layer's matmuls, fresh vs reused outputs, per row count."""
    import torch

    from kernels.cpp_build import ops
    from kernels.prepack import pack_weight

    gen = torch.Generator().manual_seed(0)
    first = torch.randn(EMBEDDED_LAYER[0], generator=gen) * 0.02  # kept to check a result against
    packs = [[(n, k, pack_weight(first if (i, j) == (0, 0) else torch.randn(n, k, generator=gen) * 0.02))
              for j, (n, k) in enumerate(EMBEDDED_LAYER)] for i in range(layers)]
    flops_per_row = 2.0 * layers * sum(n * k for n, k in EMBEDDED_LAYER)
    results = []
    for m in rows:
        xs = {k: torch.randn(m, k, generator=gen) for _, k in EMBEDDED_LAYER}
        outs = {n: torch.empty(m, n) for n, _ in EMBEDDED_LAYER}
        ops().panel_linear(outs[768], xs[512], packs[0][0][2])
        torch.testing.assert_close(outs[768], xs[512] @ first.T, rtol=1e-4, atol=1e-4)
        t_fresh = best_seconds(functools.partial(_pass, packs, xs, functools.partial(torch.empty, m)), repeats)
        t_reused = best_seconds(functools.partial(_pass, packs, xs, outs.__getitem__), repeats)
        results.append({"rows": m, "fresh_ms": t_fresh * 1e3, "reused_ms": t_reused * 1e3,
                        "reused_gflops": flops_per_row * m / t_reused / 1e9})
    return results


def _pass(packs: list[list[tuple[int, int, Any]]], xs: dict[int, Any], out_for: Any) -> None:
    """Every layer's matmuls once, each into ``out_for(out_features)``."""
    from kernels.cpp_build import ops

    for layer in packs:
        for n, k, w in layer:
            ops().panel_linear(out_for(n), xs[k], w)


def bench_routes(repeats: int) -> list[dict[str, Any]]:
    """ms of one attention call per case by the C++ route and by the SDPA route."""
    attention = importlib.import_module("kernels.paged_attention")
    saved = attention.SDPA_MIN_FRESH_QUERY, attention.SDPA_MIN_CONTEXT_QUERY
    try:
        return [_time_routes(attention, case, repeats) for case in ROUTE_CASES]
    finally:
        attention.SDPA_MIN_FRESH_QUERY, attention.SDPA_MIN_CONTEXT_QUERY = saved


def _time_routes(attention: Any, case: tuple[int, int, int], repeats: int) -> dict[str, Any]:
    import torch

    from kernels import build_attention_metadata, write_kv_cache

    reqs, query_len, context = case
    gen = torch.Generator().manual_seed(query_len + context)
    blocks_each = -(-(query_len + context) // 16)
    k_cache, v_cache = (torch.randn(reqs * blocks_each + 1, 16, 2, 64, generator=gen) for _ in range(2))
    tables = [list(range(1 + i * blocks_each, 1 + (i + 1) * blocks_each)) for i in range(reqs)]
    meta = build_attention_metadata([query_len] * reqs, [context] * reqs, tables, 16)
    q, k, v = (torch.randn(reqs * query_len, h, 64, generator=gen) for h in (8, 2, 2))
    write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)

    def call() -> Any:
        meta.cache.clear()  # the route plan is cached per step
        return attention.paged_attention(q, k, v, k_cache, v_cache, meta, 0.125)

    timed = {}
    for route, thresholds in (("cpp", (10**9, 10**9)), ("sdpa", (1, 1))):
        attention.SDPA_MIN_FRESH_QUERY, attention.SDPA_MIN_CONTEXT_QUERY = thresholds
        timed[route] = (call().clone(), best_seconds(call, repeats))
    torch.testing.assert_close(timed["cpp"][0], timed["sdpa"][0], rtol=1e-4, atol=1e-4)
    return {"requests": reqs, "query": query_len, "context": context,
            "cpp_ms": timed["cpp"][1] * 1e3, "sdpa_ms": timed["sdpa"][1] * 1e3}


def output_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r["threads"], r["rows"], r["fresh_ms"], r["reused_ms"], r["fresh_ms"] / r["reused_ms"],
             r["reused_gflops"]] for r in results]


def route_rows(results: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r["threads"], r["requests"], r["query"], r["context"], r["cpp_ms"], r["sdpa_ms"],
             r["cpp_ms"] / r["sdpa_ms"]] for r in results]
