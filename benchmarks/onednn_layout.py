"""oneDNN's matmul on a weight laid out once in its own format against the plain weight, beside the panels.

    agent-engine bench onednn-layout [--shapes 1152x896,896x4864] [--dtypes float32,bfloat16] [--rows 1,32,256]

Per weight shape ``NxK``, dtype and row count, three routes of ``x @ W^T`` for float32 ``x``, as the
engine runs them (``kernels.linear_routes``), timed in turns (best of ``--repeats``): oneDNN on the
plain weight (which it copies into its blocked layout on every call), oneDNN on the copy
``onednn_weight`` made once (AMX's tile layout where the tiles are granted), and the C++ panels
(``panel_linear``). Reported: milliseconds, GFLOP/s of each, and the ratios plain / blocked and panels
/ blocked (above 1: the blocked copy is faster). A bfloat16 shape is timed only where oneDNN multiplies
bfloat16 natively (AVX512_BF16 or AMX granted). Prints the CPU, its kernel variant and AMX state, and
the machine's load; writes JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial

from agent_engine.reporting import machine_info, machine_line, print_table, write_json

HELP = "oneDNN's matmul on its own weight layout vs the plain weight vs the panels (ms, GFLOP/s, side by side)"
QWEN_05B_SHAPES = "1152x896,896x896,9728x896,896x4864"  # Qwen2.5-Coder-0.5B's QKV, O, gate/up, down


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--shapes", default=QWEN_05B_SHAPES,
                    help=f"comma list of weight shapes NxK (default {QWEN_05B_SHAPES}: Qwen2.5-Coder-0.5B's layers)")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="weight dtypes (default float32,bfloat16)")
    ap.add_argument("--rows", default="1,32,256,1024", help="rows of x (default 1,32,256,1024)")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per route, best taken (default 7)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    ap.add_argument("--json", default="out/onednn_layout.json", help="results JSON")


def _shapes(text: str) -> list[tuple[int, int]]:
    """``NxK`` pairs, each positive (ValueError otherwise)."""
    shapes = []
    for item in text.split(","):
        n, sep, k = item.strip().partition("x")
        if not sep or not n.isdigit() or not k.isdigit() or int(n) < 1 or int(k) < 1:
            raise ValueError(f"--shapes takes NxK with positive integers, got {item!r}")
        shapes.append((int(n), int(k)))
    return shapes


def run(args: argparse.Namespace) -> int:
    import torch

    from agent_engine.machine_load import LoadMonitor
    from kernels.cpp_build import ops
    from kernels.linear_routes import WEIGHT_DTYPES, onednn_has, onednn_linear, onednn_weight
    from kernels.prepack import pack_weight
    from kernels.timing import best_seconds_each

    shapes, rows = _shapes(args.shapes), [int(r) for r in args.rows.split(",")]
    dtypes = args.dtypes.split(",")
    if min(rows) < 1 or args.repeats < 1 or any(d not in WEIGHT_DTYPES for d in dtypes):
        raise ValueError(f"--rows and --repeats must be positive, --dtypes among {sorted(WEIGHT_DTYPES)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    table, results = [], []
    monitor = LoadMonitor().start()
    gen = torch.Generator().manual_seed(0)
    for dtype in dtypes:
        if not onednn_has(dtype):
            print(f"{dtype}: oneDNN's matmul is no route on this CPU (no native bfloat16): skipped")
            continue
        for n, k in shapes:
            weight = torch.randn(n, k, generator=gen).to(WEIGHT_DTYPES[dtype])
            blocked, panels = onednn_weight(weight), pack_weight(weight)
            for m in rows:
                x, out = torch.randn(m, k, generator=gen), torch.empty(m, n)
                plain_s, blocked_s, panels_s = best_seconds_each(
                    [partial(onednn_linear, x, weight), partial(onednn_linear, x, weight, None, blocked),
                     partial(ops().panel_linear, out, x, panels)], args.repeats)
                gflops = [2 * m * n * k / s / 1e9 for s in (plain_s, blocked_s, panels_s)]
                table.append([dtype, f"{n}x{k}", m, plain_s * 1e3, blocked_s * 1e3, panels_s * 1e3,
                              *(round(g) for g in gflops), plain_s / blocked_s, panels_s / blocked_s])
                results.append({"dtype": dtype, "out_features": n, "in_features": k, "rows": m,
                                "ms": {"plain": plain_s * 1e3, "blocked": blocked_s * 1e3, "panels": panels_s * 1e3},
                                "gflops": dict(zip(("plain", "blocked", "panels"), gflops, strict=True))})
    load = monitor.stop()
    print(machine_line())
    print_table(["dtype", "weight", "rows", "plain ms", "blocked ms", "panels ms", "plain GF/s", "blocked GF/s",
                 "panels GF/s", "plain / blocked", "panels / blocked"], table)
    print(f"machine during the runs: {load.label()}")
    write_json(args.json, {"threads": torch.get_num_threads(), "repeats": args.repeats, "results": results,
                           "load": load.as_dict(), "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.onednn_layout``: the flags and run of ``agent-engine bench onednn-layout``."""
    from benchmarks.cli import run_standalone

    return run_standalone("onednn-layout", argv)


if __name__ == "__main__":
    raise SystemExit(main())
