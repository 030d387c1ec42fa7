"""``agent-engine bench NAME``: every benchmark as a subcommand (plugged into the CLI by entry point).

Each benchmark module offers ``add_arguments(parser)`` and ``run(args) -> int`` and also runs as
``python -m benchmarks.NAME`` with the same flags. Invariant: a benchmark module's top level imports
no torch or transformers (they load inside ``run``), so building ``bench``'s parser stays quick;
``agent-engine --help`` imports none of them.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

HELP = "benchmarks: throughput, scheduler overhead, kernels, serving load, JCT, TTL sweeps, simulator slices"

# Subcommand name -> module; each module's ``HELP`` is its one-line help.
BENCHMARKS: dict[str, str] = {
    "throughput": "benchmarks.throughput",
    "scheduler": "benchmarks.scheduler_overhead",
    "kernels": "benchmarks.kernels_bench",
    "serve": "benchmarks.serve_load",
    "prompt": "benchmarks.prompt_speed",
    "budget": "benchmarks.step_budget_bench",
    "jct": "benchmarks.jct",
    "jct-load": "benchmarks.jct_load",
    "ttl-sweep": "benchmarks.ttl_sweep",
    "timeline": "benchmarks.sched_timeline",
    "sim-slices": "benchmarks.sim_slices",
    "sim-validate": "benchmarks.sim_validate",
    "agent-tasks": "benchmarks.agent_tasks",
    "localization": "benchmarks.localization",
    "mutants": "benchmarks.mutation_repair",
    "injected": "benchmarks.injected_repair",
    "reliability": "benchmarks.reliability",
    "structured": "benchmarks.structured_bench",
    "quant-parity": "benchmarks.quant_parity",
    "graphs": "benchmarks.decode_graphs",
    "stack": "benchmarks.layer_stack_bench",
    "onednn-layout": "benchmarks.onednn_layout",
    "tile-routes": "benchmarks.tile_routes",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subcommand per benchmark, with that benchmark's own flags."""
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    for name, module in BENCHMARKS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)


def run_standalone(name: str, argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.MODULE``: the same parser and run as ``agent-engine bench NAME``."""
    mod = importlib.import_module(BENCHMARKS[name])
    parser = argparse.ArgumentParser(prog=f"agent-engine bench {name}", description=mod.HELP)
    mod.add_arguments(parser)
    return int(mod.run(parser.parse_args(argv)) or 0)
