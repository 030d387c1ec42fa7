"""Every route of a prefill-width matmul side by side, the AMX tile routes included where the CPU grants them.

    agent-engine bench tile-routes [--rows 32,256,1024] [--threads 2] [--repeats 3]

Two tables, each route timed in turns on the same inputs (best of ``--repeats``), milliseconds and
GFLOP/s:

* GGUF blocks (random blocks of Qwen2.5-Coder-1.5B's Q4_K_M layer shapes: gate/up and QKV in Q4_K, down
  in Q6_K): the int8 route (``gguf_linear_int8``), the wide route in bfloat16 pairs
  (``gguf_linear_wide``), its AMX tile form (``gguf_linear_tiles``) and its oneDNN form
  (``kernels.onednn_wide``);
* bfloat16 weights (Qwen2.5-Coder-0.5B's shapes; gate/up with its SiLU): the pair panels
  (``panel_linear``, ``panel_linear_silu``), oneDNN on its own layout (``onednn_weight``) and the pair
  panels in AMX tiles (``panel_linear_tiles``).

A route this CPU or build has not (no AVX512_BF16 kernels; no AMX tiles granted, ``amx.tiles_ready``;
no native bfloat16 for oneDNN) shows as absent. Prints the CPU, its kernel variant and AMX state and
the machine's load; writes JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial

from agent_engine.reporting import machine_info, machine_line, print_table, write_json

HELP = "prefill-width matmuls on GGUF blocks and bfloat16 weights: every route, AMX tiles included (side by side)"
GGUF_SHAPES = ((2 * 8960, 1536, 12), (2048, 1536, 12), (1536, 8960, 14))  # (N, K, GGML type): the 1.5B's
BF16_SHAPES = ((1152, 896, False), (896, 4864, False), (9728, 896, True))  # (N, K, gated): the 0.5B's


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--rows", default="32,256,1024", help="rows of x (default 32,256,1024)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per route, best taken (default 3)")
    ap.add_argument("--json", default="out/tile_routes.json", help="results JSON")


def _gguf_routes(raw: object, qtype: int) -> dict[str, Callable[..., object] | None]:
    """The routes of a one-part GGUF matmul, each ``(out, x)``: None where absent here."""
    from kernels.amx import tiles_ready
    from kernels.cpp_build import bf16_products, ops
    from kernels.onednn_wide import available, onednn_wide

    return {
        "int8": lambda out, x: ops().gguf_linear_int8(out, x, [raw], [qtype]),
        "wide bf16": (lambda out, x: ops().gguf_linear_wide(out, x, [raw], [qtype], True)) if bf16_products() else None,
        "tiles": (lambda out, x: ops().gguf_linear_tiles(out, x, [raw], [qtype], False)) if tiles_ready() else None,
        "oneDNN form": (lambda out, x: onednn_wide(out, x, [raw], [qtype])) if available() else None,
    }


def _bf16_routes(weight: object, gated: bool) -> dict[str, Callable[..., object] | None]:
    """The routes of a bfloat16 weight (gate/up with its SiLU), each ``(out, x)``: None where absent here."""
    from kernels.amx import tiles_ready
    from kernels.cpp_build import ops
    from kernels.linear_routes import onednn_has, onednn_linear, onednn_weight
    from kernels.prepack import pack_gate_up, pack_weight

    panels = pack_gate_up(weight, weight.shape[0] // 2) if gated else pack_weight(weight)  # type: ignore[attr-defined]
    blocked = onednn_weight(weight) if onednn_has("bfloat16") else None  # type: ignore[arg-type]
    if gated:
        def onednn(out: object, x: object) -> object:
            return ops().silu_and_mul(out, onednn_linear(x, weight, None, blocked))

        return {"panels": lambda out, x: ops().panel_linear_silu(out, x, panels),
                "oneDNN": onednn if blocked is not None else None,
                "tiles": (lambda out, x: ops().panel_linear_tiles(out, x, panels, True, False)) if tiles_ready() else None}
    return {"panels": lambda out, x: ops().panel_linear(out, x, panels),
            "oneDNN": (lambda out, x: onednn_linear(x, weight, None, blocked)) if blocked is not None else None,
            "tiles": (lambda out, x: ops().panel_linear_tiles(out, x, panels, False, False)) if tiles_ready() else None}


def _time(routes: dict[str, Callable[..., object] | None], out: object, x: object, repeats: int) -> dict[str, float | None]:
    """Seconds of each present route (None for an absent one), timed in turns."""
    from kernels.timing import best_seconds_each

    present = {name: fn for name, fn in routes.items() if fn is not None}
    seconds = dict(zip(present, best_seconds_each([partial(fn, out, x) for fn in present.values()], repeats),
                       strict=True))
    return {name: seconds.get(name) for name in routes}


def _row(label: str, rows: int, flops: float, seconds: dict[str, float | None]) -> list[object]:
    cells: list[object] = [label, rows]
    for s in seconds.values():
        cells += [None, None] if s is None else [s * 1e3, flops / s / 1e9]
    return cells


def run(args: argparse.Namespace) -> int:
    import torch

    from agent_engine.machine_load import LoadMonitor
    from benchmarks.quant_bench import random_blocks
    from kernels.cpp_build import load_cpu_ops

    rows = [int(r) for r in args.rows.split(",")]
    if min(rows) < 1 or args.repeats < 1:
        raise ValueError("--rows and --repeats must be positive")
    if not load_cpu_ops():
        raise ValueError("the C++ kernels did not build here: no routes to time")
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    results: list[dict[str, object]] = []
    tables: dict[str, list[list[object]]] = {"gguf": [], "bf16": []}
    names: dict[str, list[str]] = {}
    monitor = LoadMonitor().start()
    for n, k, qtype in GGUF_SHAPES:
        routes = _gguf_routes(torch.from_numpy(random_blocks(qtype, n, k, seed=1)), qtype)
        names["gguf"] = list(routes)
        for m in rows:
            seconds = _time(routes, torch.empty(m, n), torch.randn(m, k, generator=gen), args.repeats)
            tables["gguf"].append(_row(f"{n}x{k} type {qtype}", m, 2.0 * m * n * k, seconds))
            results.append({"kind": "gguf", "n": n, "k": k, "qtype": qtype, "rows": m, "seconds": seconds})
    for n, k, gated in BF16_SHAPES:
        routes = _bf16_routes(torch.randn(n, k, generator=gen).bfloat16(), gated)
        names["bf16"] = list(routes)
        for m in rows:
            out = torch.empty(m, n // 2 if gated else n)
            seconds = _time(routes, out, torch.randn(m, k, generator=gen), args.repeats)
            tables["bf16"].append(_row(f"{n}x{k}" + (" +silu" if gated else ""), m, 2.0 * m * n * k, seconds))
            results.append({"kind": "bf16", "n": n, "k": k, "gated": gated, "rows": m, "seconds": seconds})
    load = monitor.stop()
    print(machine_line())
    for kind, title in (("gguf", "GGUF blocks"), ("bf16", "bfloat16 weights")):
        print_table([title, "rows", *(f"{r} {u}" for r in names[kind] for u in ("ms", "GF/s"))], tables[kind])
    print(f"machine during the runs: {load.label()}")
    write_json(args.json, {"threads": torch.get_num_threads(), "repeats": args.repeats, "results": results,
                           "load": load.as_dict(), "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.tile_routes``: the flags and run of ``agent-engine bench tile-routes``."""
    from benchmarks.cli import run_standalone

    return run_standalone("tile-routes", argv)


if __name__ == "__main__":
    raise SystemExit(main())
